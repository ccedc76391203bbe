package schema

import (
	"fmt"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// ecmaPatterns rewrites every regular expression of the schema ("pattern",
// the keys of "patternProperties") from CUE's syntax (Go's RE2) into the
// syntax both RE2 and ECMA-262 read alike: JSON Schema's patterns are
// ECMA-262, which editors compile (with the u flag), while Go validators
// compile them with RE2. (?s) has no ECMA form, and \s or . match other
// characters in ECMA; the rewrite spells each out as a class, so a string
// matches in an editor exactly when it matches in CUE.
func ecmaPatterns(x any) error {
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			switch {
			case k == "pattern":
				p, ok := v.(string)
				if !ok {
					break
				}
				e, err := ECMA(p)
				if err != nil {
					return err
				}
				x[k] = e
			case k == "patternProperties":
				props, ok := v.(map[string]any)
				if !ok {
					break
				}
				out := map[string]any{}
				for p, s := range props {
					e, err := ECMA(p)
					if err != nil {
						return err
					}
					if err := ecmaPatterns(s); err != nil {
						return err
					}
					out[e] = s
				}
				x[k] = out
				continue
			}
			if err := ecmaPatterns(v); err != nil {
				return err
			}
		}
	case []any:
		for _, v := range x {
			if err := ecmaPatterns(v); err != nil {
				return err
			}
		}
	}
	return nil
}

// ECMA rewrites a Go regular expression into one that RE2 and ECMA-262
// (with or without the u flag) read with the same meaning, or says which
// part has no such form.
func ECMA(pattern string) (string, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", fmt.Errorf("pattern %q: %w", pattern, err)
	}
	if !needsRewrite(pattern, re) {
		return pattern, nil // as written in CUE, which reads better
	}
	var b strings.Builder
	if err := writeECMA(&b, re); err != nil {
		return "", fmt.Errorf("pattern %q has no ECMA-262 form: %w", pattern, err)
	}
	return b.String(), nil
}

// needsRewrite reports whether pattern uses what RE2 and ECMA-262 read
// differently or only one of them reads: flags, Perl and POSIX classes,
// \A \z \Q \p, and . (RE2's matches \r).
func needsRewrite(pattern string, re *syntax.Regexp) bool {
	for _, s := range []string{`(?`, `\s`, `\S`, `\d`, `\D`, `\w`, `\W`, `\p`, `\P`, `\Q`, `\A`, `\z`, `[[:`, `\x`, `\C`} {
		if strings.Contains(pattern, s) {
			return true
		}
	}
	dot := false
	var walk func(*syntax.Regexp)
	walk = func(r *syntax.Regexp) {
		if r.Op == syntax.OpAnyChar || r.Op == syntax.OpAnyCharNotNL {
			dot = true
		}
		for _, s := range r.Sub {
			walk(s)
		}
	}
	walk(re)
	return dot
}

func writeECMA(b *strings.Builder, re *syntax.Regexp) error {
	switch re.Op {
	case syntax.OpNoMatch:
		b.WriteString("[^\\s\\S]")
	case syntax.OpEmptyMatch:
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 && unicode.SimpleFold(r) != r {
				// The parser folds [eE] into a case-insensitive e: spell out
				// the characters it matches.
				if err := writeClass(b, orbit(r)); err != nil {
					return err
				}
				continue
			}
			if err := writeRune(b, r, false); err != nil {
				return err
			}
		}
	case syntax.OpCharClass:
		return writeClass(b, re.Rune)
	case syntax.OpAnyCharNotNL:
		b.WriteString("[^\\n]") // ECMA's . also leaves out \r, \u2028, \u2029
	case syntax.OpAnyChar:
		b.WriteString("[\\s\\S]")
	case syntax.OpBeginText:
		b.WriteString("^")
	case syntax.OpEndText:
		if re.Flags&syntax.WasDollar == 0 {
			return fmt.Errorf(`\z`)
		}
		b.WriteString("$")
	case syntax.OpBeginLine, syntax.OpEndLine:
		return fmt.Errorf("multi-line ^ or $ (?m)")
	case syntax.OpWordBoundary:
		b.WriteString(`\b`)
	case syntax.OpNoWordBoundary:
		b.WriteString(`\B`)
	case syntax.OpCapture:
		b.WriteString("(")
		if err := writeECMA(b, re.Sub[0]); err != nil {
			return err
		}
		b.WriteString(")")
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		if err := writeAtom(b, re.Sub[0]); err != nil {
			return err
		}
		switch re.Op {
		case syntax.OpStar:
			b.WriteString("*")
		case syntax.OpPlus:
			b.WriteString("+")
		case syntax.OpQuest:
			b.WriteString("?")
		default:
			switch {
			case re.Max == -1:
				fmt.Fprintf(b, "{%d,}", re.Min)
			case re.Min == re.Max:
				fmt.Fprintf(b, "{%d}", re.Min)
			default:
				fmt.Fprintf(b, "{%d,%d}", re.Min, re.Max)
			}
		}
		if re.Flags&syntax.NonGreedy != 0 {
			b.WriteString("?")
		}
	case syntax.OpConcat:
		for _, s := range re.Sub {
			if s.Op == syntax.OpAlternate {
				b.WriteString("(?:")
				if err := writeECMA(b, s); err != nil {
					return err
				}
				b.WriteString(")")
				continue
			}
			if err := writeECMA(b, s); err != nil {
				return err
			}
		}
	case syntax.OpAlternate:
		for i, s := range re.Sub {
			if i > 0 {
				b.WriteString("|")
			}
			if err := writeECMA(b, s); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("operator %v", re.Op)
	}
	return nil
}

// orbit is the class of the characters r matches case-insensitively, as
// sorted ranges of one character each.
func orbit(r rune) []rune {
	set := []rune{r}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		set = append(set, f)
	}
	slices.Sort(set)
	var out []rune
	for _, c := range set {
		out = append(out, c, c)
	}
	return out
}

// writeAtom writes re so that a repetition applies to all of it.
func writeAtom(b *strings.Builder, re *syntax.Regexp) error {
	single := re.Op == syntax.OpCharClass || re.Op == syntax.OpAnyChar || re.Op == syntax.OpAnyCharNotNL ||
		re.Op == syntax.OpCapture || (re.Op == syntax.OpLiteral && len(re.Rune) == 1 && re.Flags&syntax.FoldCase == 0)
	if single {
		return writeECMA(b, re)
	}
	b.WriteString("(?:")
	if err := writeECMA(b, re); err != nil {
		return err
	}
	b.WriteString(")")
	return nil
}

// writeClass writes a class from its ranges; a class that reaches the last
// code point is written as the negation of the rest, which keeps it inside
// the Basic Multilingual Plane (no surrogate pairs without the u flag).
func writeClass(b *strings.Builder, ranges []rune) error {
	if len(ranges) == 2 && ranges[0] == 0 && ranges[1] == unicode.MaxRune {
		b.WriteString(`[\s\S]`)
		return nil
	}
	neg := len(ranges) > 0 && ranges[len(ranges)-1] == unicode.MaxRune
	if neg {
		var rest []rune
		next := rune(0)
		for i := 0; i < len(ranges); i += 2 {
			if ranges[i] > next {
				rest = append(rest, next, ranges[i]-1)
			}
			next = ranges[i+1] + 1
		}
		ranges = rest
		b.WriteString("[^")
	} else {
		b.WriteString("[")
	}
	for i := 0; i < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		if err := writeRune(b, lo, true); err != nil {
			return err
		}
		if hi != lo {
			if hi > lo+1 {
				b.WriteString("-")
			}
			if err := writeRune(b, hi, true); err != nil {
				return err
			}
		}
	}
	b.WriteString("]")
	return nil
}

// writeRune writes one character as both syntaxes read it: the escapes they
// share, a literal otherwise.
func writeRune(b *strings.Builder, r rune, inClass bool) error {
	switch r {
	case '\t':
		b.WriteString(`\t`)
		return nil
	case '\n':
		b.WriteString(`\n`)
		return nil
	case '\f':
		b.WriteString(`\f`)
		return nil
	case '\r':
		b.WriteString(`\r`)
		return nil
	case '\v':
		b.WriteString(`\v`)
		return nil
	}
	switch {
	case r > 0xFFFF:
		return fmt.Errorf("character %U outside the Basic Multilingual Plane", r)
	case r < 0x20 || r == 0x7F:
		fmt.Fprintf(b, `\x%02X`, r)
	case r < 0x80 && strings.ContainsRune(specials(inClass), r):
		b.WriteString(`\` + string(r))
	case r >= 0x80 && !unicode.IsPrint(r):
		return fmt.Errorf("unprintable character %s", strconv.QuoteRune(r))
	default:
		b.WriteRune(r)
	}
	return nil
}

func specials(inClass bool) string {
	if inClass {
		return `\]^-[`
	}
	return `\^$.|?*+()[]{}/`
}
