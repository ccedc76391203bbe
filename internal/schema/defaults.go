package schema

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/ast/astutil"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/token"
)

// editor rewrites #Values, in the file that declares it, into the schema of
// one values file: what it may say, without what only evaluation of a whole
// target can decide, which the encoder cannot follow anyway. inst is the
// module as built, to look definitions up in.
//
//   - Defaults: a default that is a literal or a definition stays as one more
//     allowed value; a default drawn from other data (fleet.rings[ring],
//     pins.releases[version], a let) goes, since evaluation holds it to the
//     field's other disjuncts anyway, and the encoder gives up on the whole
//     field for it (a version that is any string, digests that are anything).
//   - Cross-field rules: an operand of a conjunction that refers to another
//     field (installDir: #AbsPath & !=stateDir) and a conditional field
//     (if source == "oci" {...}) depend on the rest of the target: dropped
//     and listed in dropped (vet keeps them).
//   - A pattern constraint over a definition of a few strings ([#PolicyID]:
//     x) becomes one optional field per string: the same closed struct, which
//     the encoder can say (it gives up on such a pattern).
//   - A pattern constraint over another string definition ([#LabelKey]: x,
//     which two regular expressions make: the encoder takes one) becomes
//     [string]: x, and the definition returns as the struct's propertyNames
//     (names).
type editor struct {
	inst    cue.Value
	dropped []string
	names   []propertyNames
}

// propertyNames is a struct (at path: a definition's name, then field names)
// whose keys must be a definition's (def, without #).
type propertyNames struct {
	path []string
	def  string
}

func (e *editor) edit(files []*ast.File) {
	type decl struct {
		field   *ast.Field
		file    string
		imports map[string]bool
	}
	defs := map[string][]decl{} // a definition may be declared in several files
	for _, f := range files {
		imports := map[string]bool{}
		for im := range f.ImportSpecs() {
			p, _ := strconv.Unquote(im.Path.Value)
			name := path.Base(p)
			if im.Name != nil {
				name = im.Name.Name
			}
			imports[name] = true
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.Field); ok {
				if id, ok := fd.Label.(*ast.Ident); ok && strings.HasPrefix(id.Name, "#") {
					defs[id.Name] = append(defs[id.Name], decl{fd, f.Filename, imports})
				}
			}
		}
	}
	// #Values and the definitions it uses (#Toleration's conditions are
	// cross-field rules too), each rewritten once.
	done := map[string]bool{}
	todo := []string{"#Values"}
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		if done[name] {
			continue
		}
		done[name] = true
		for _, d := range defs[name] {
			ast.Walk(d.field.Value, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && strings.HasPrefix(id.Name, "#") {
					todo = append(todo, id.Name)
				}
				return true
			}, nil)
			d.field.Value = e.rewrite(d.file, name, d.field.Value, d.imports)
		}
	}
	sort.Strings(e.dropped)
}

func (e *editor) rewrite(file, def string, n ast.Expr, imports map[string]bool) ast.Expr {
	static := func(x ast.Expr) bool { return refersToNoData(x, imports) }
	drop := func(x ast.Node) {
		var b []byte
		if c, ok := x.(*ast.Comprehension); ok {
			// format takes a comprehension only as a declaration.
			b, _ = format.Node(&ast.File{Decls: []ast.Decl{c}})
		} else {
			b, _ = format.Node(x)
		}
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "//") {
				lines = append(lines, l)
			}
		}
		text := strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
		if _, ok := x.(*ast.Comprehension); ok {
			text, _, _ = strings.Cut(text, " {") // the condition says it
		}
		e.dropped = append(e.dropped, fmt.Sprintf("%s:%d: %s", path.Base(file), x.Pos().Line(), text))
	}
	out := astutil.Apply(n, func(c astutil.Cursor) bool {
		switch x := c.Node().(type) {
		case *ast.Comprehension:
			if p := c.Parent(); p != nil && isStruct(p.Node()) {
				drop(x)
				c.Delete()
				return false
			}
		case *ast.Field:
			if id, ok := x.Label.(*ast.Ident); ok && strings.HasPrefix(id.Name, "_") {
				return false // hidden: no part of a values file
			}
			if name, ok := e.stringPattern(x); ok {
				x.Label = &ast.ListLit{Elts: []ast.Expr{ast.NewIdent("string")}}
				e.names = append(e.names, propertyNames{path: append([]string{def}, fieldPath(c)...), def: name})
				return true
			}
			if keys := e.patternKeys(x); keys != nil {
				for i := len(keys) - 1; i >= 0; i-- {
					c.InsertAfter(&ast.Field{Label: ast.NewString(keys[i]), Constraint: token.OPTION, Value: x.Value})
				}
				c.Delete()
			}
		}
		return true
	}, func(c astutil.Cursor) bool {
		b, ok := c.Node().(*ast.BinaryExpr)
		if !ok || (b.Op != token.OR && b.Op != token.AND) {
			return true
		}
		if p := c.Parent(); p != nil {
			if p, ok := p.Node().(*ast.BinaryExpr); ok && p.Op == b.Op {
				return true // the outermost operator of a chain rebuilds it
			}
		}
		var keep []ast.Expr
		changed := false
		for _, x := range operands(b, b.Op) {
			u, isDefault := x.(*ast.UnaryExpr)
			isDefault = isDefault && u.Op == token.MUL && b.Op == token.OR
			switch {
			case isDefault && static(u.X):
				keep = append(keep, u.X)
				changed = true
			case isDefault:
				changed = true
			case b.Op == token.AND && !static(x):
				drop(x)
				changed = true
			default:
				keep = append(keep, x)
			}
		}
		switch {
		case !changed:
		case len(keep) > 0:
			c.Replace(ast.NewBinExpr(b.Op, keep...))
		case b.Op == token.AND:
			c.Replace(ast.NewIdent("_"))
		}
		return true
	}).(ast.Expr)
	// A let only a dropped part used is now unreferenced, which CUE refuses.
	for dropUnusedLets(out) {
	}
	return out
}

// refersToNoData reports whether x refers to nothing but definitions,
// imported packages and CUE's predeclared names: no field, no let, no index
// (fleet.rings[ring]).
func refersToNoData(x ast.Expr, imports map[string]bool) bool {
	ok := true
	ast.Walk(x, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IndexExpr:
			ok = false
		case *ast.SelectorExpr:
			// #SandboxOverhead.cpu, strings.MaxRunes: the base decides.
			if id, isID := n.X.(*ast.Ident); isID && imports[id.Name] {
				return false
			}
			ok = ok && refersToNoData(n.X, imports)
			return false
		case *ast.Ident:
			if !strings.HasPrefix(n.Name, "#") && !predeclared[n.Name] {
				ok = false
			}
		case *ast.Field:
			// A struct literal's label names no data; its value may.
			if v, isExpr := n.Value.(ast.Expr); isExpr {
				ok = ok && refersToNoData(v, imports)
			}
			return false
		}
		return ok
	}, nil)
	return ok
}

var predeclared = map[string]bool{"_": true, "string": true, "int": true, "bool": true, "number": true, "float": true, "bytes": true, "null": true, "true": true, "false": true}

// operands flattens a op b op c (parsed left-nested, parentheses kept).
func operands(e ast.Expr, op token.Token) []ast.Expr {
	if b, ok := e.(*ast.BinaryExpr); ok && b.Op == op {
		return append(operands(b.X, op), operands(b.Y, op)...)
	}
	return []ast.Expr{e}
}

// dropUnusedLets removes the let clauses of n whose name no identifier
// refers to (by name: a shadowed name keeps its let, which is harmless).
func dropUnusedLets(n ast.Node) bool {
	used := map[string]int{} // identifiers minus let names
	ast.Walk(n, func(x ast.Node) bool {
		switch x := x.(type) {
		case *ast.Ident:
			used[x.Name]++
		case *ast.LetClause:
			used[x.Ident.Name]--
		}
		return true
	}, nil)
	changed := false
	astutil.Apply(n, func(c astutil.Cursor) bool {
		if l, ok := c.Node().(*ast.LetClause); ok && used[l.Ident.Name] <= 0 {
			c.Delete()
			changed = true
		}
		return true
	}, nil)
	return changed
}

// patternDef is the package definition a pattern label [#Def] names, and
// its name without #.
func (e *editor) patternDef(f *ast.Field) (string, cue.Value, bool) {
	l, ok := f.Label.(*ast.ListLit)
	if !ok || len(l.Elts) != 1 {
		return "", cue.Value{}, false
	}
	id, ok := l.Elts[0].(*ast.Ident)
	if !ok || !strings.HasPrefix(id.Name, "#") {
		return "", cue.Value{}, false
	}
	def := e.inst.LookupPath(cue.ParsePath(id.Name))
	return id.Name[1:], def, def.Exists()
}

// stringPattern reports the definition of a pattern label [#Def] whose
// definition is a string constraint other than a few strings.
func (e *editor) stringPattern(f *ast.Field) (string, bool) {
	name, def, ok := e.patternDef(f)
	if !ok || def.IncompleteKind() != cue.StringKind || e.patternKeys(f) != nil {
		return "", false
	}
	return name, true
}

// fieldPath is the labels of the fields enclosing c's node, outermost first.
func fieldPath(c astutil.Cursor) []string {
	var out []string
	for p := c.Parent(); p != nil; p = p.Parent() {
		if f, ok := p.Node().(*ast.Field); ok {
			name, _, err := ast.LabelName(f.Label)
			if err != nil {
				name = "?"
			}
			out = append([]string{name}, out...)
		}
	}
	return out
}

// patternKeys are the strings a pattern label [#Def] stands for, when #Def
// is a package definition that is one string or a disjunction of strings.
func (e *editor) patternKeys(f *ast.Field) []string {
	_, def, ok := e.patternDef(f)
	if !ok {
		return nil
	}
	vals := []cue.Value{def}
	if op, args := def.Expr(); op == cue.OrOp {
		vals = args
	}
	var keys []string
	for _, v := range vals {
		s, err := v.String()
		if err != nil {
			return nil
		}
		keys = append(keys, s)
	}
	return keys
}

func isStruct(n ast.Node) bool {
	_, ok := n.(*ast.StructLit)
	return ok
}
