// Command schemaprune prunes a CUE module's generated schemas (cue.mod/gen) to
// what the module uses: `make schemas` (ci/schemas.sh) runs it last, after
// `cue get go`, `cue get crd` and the repair.
//
//	go run ./ci/schemaprune [-n] MODULE_DIR
//
// The roots are the references of the module's package files (MODULE_DIR/*.cue)
// to the top-level declarations of imported packages, e.g. corev1.#Namespace
// (import aliases resolved per file). From them it computes every top-level
// declaration of cue.mod/gen/** that is reachable: within a package, any
// identifier that names one of the package's top-level declarations (an
// over-approximation: a field that merely shares such a name keeps it too);
// across packages, the qualified references through each file's imports. The
// whole value of a kept declaration is walked, so definitions used only in
// embedded or nested positions are kept.
//
// Each cue.mod/gen file is then rewritten with only its reachable top-level
// declarations (package clause and the kept declarations' comments stay),
// without the imports that became unused (CUE rejects them); a file left
// without declarations is deleted, and so is a directory left empty. A file
// that loses nothing is not rewritten. The output is deterministic and a
// second run changes nothing. With -n it only reports what it would do.
//
// Pruning never changes what a kept definition means: a declaration that is
// not reachable from the module cannot take part in its evaluation. A module
// file that starts using another definition (say corev1.#Secret) needs
// `make schemas` again, which regenerates everything and prunes anew; until
// then CUE reports the reference as not found.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/parser"
)

func main() {
	dryRun := flag.Bool("n", false, "report what would be pruned, write nothing")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: schemaprune [-n] MODULE_DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	st, err := prune(flag.Arg(0), *dryRun)
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemaprune:", err)
		os.Exit(1)
	}
	verb := "pruned"
	if *dryRun {
		verb = "would prune"
	}
	fmt.Printf("schemaprune: %s %s: kept %d of %d top-level declarations in %d packages; %d files rewritten, %d deleted; %d -> %d bytes\n",
		verb, filepath.Join(flag.Arg(0), "cue.mod", "gen"), st.keptDecls, st.decls, st.keptPkgs,
		st.rewritten, st.deleted, st.bytesBefore, st.bytesAfter)
}

// pkgKey names one package of cue.mod/gen: its import path without qualifier
// (its directory below cue.mod/gen) and its package name.
type pkgKey struct{ path, name string }

func (k pkgKey) String() string { return k.path + ":" + k.name }

// ref is one top-level declaration of a package; name "" stands for all of them
// (the package used as a value).
type ref struct {
	pkg  pkgKey
	name string
}

type file struct {
	path string // on disk
	src  []byte
	ast  *ast.File
	pkg  pkgKey
	// imports maps each import spec of the file to the gen package it names;
	// specs naming a builtin or a package outside cue.mod/gen are absent.
	imports map[*ast.ImportSpec]pkgKey
}

type decl struct {
	file *file
	node ast.Decl
	// names are the identifiers the declaration binds at top level (the label
	// and any label alias); nil for a declaration that is always kept.
	names []string
}

type pkg struct {
	key   pkgKey
	files []*file
	decls []*decl
	// byName indexes the declarations by each name they bind.
	byName map[string][]*decl
}

type stats struct {
	decls, keptDecls, keptPkgs, rewritten, deleted int
	bytesBefore, bytesAfter                        int
}

func prune(modDir string, dryRun bool) (stats, error) {
	var st stats
	genDir := filepath.Join(modDir, "cue.mod", "gen")

	// The module's own package files are the roots.
	roots, err := filepath.Glob(filepath.Join(modDir, "*.cue"))
	if err != nil {
		return st, err
	}
	if len(roots) == 0 {
		return st, fmt.Errorf("no .cue files in %s", modDir)
	}
	var rootFiles []*file
	for _, p := range roots {
		f, err := parse(genDir, p, "")
		if err != nil {
			return st, err
		}
		rootFiles = append(rootFiles, f)
	}

	// Every package below cue.mod/gen.
	pkgs := map[pkgKey]*pkg{}
	err = filepath.WalkDir(genDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".cue") {
			return err
		}
		rel, err := filepath.Rel(genDir, filepath.Dir(p))
		if err != nil {
			return err
		}
		f, err := parse(genDir, p, filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		st.bytesBefore += len(f.src)
		pk := pkgs[f.pkg]
		if pk == nil {
			pk = &pkg{key: f.pkg, byName: map[string][]*decl{}}
			pkgs[f.pkg] = pk
		}
		pk.files = append(pk.files, f)
		for _, n := range f.ast.Decls {
			d := &decl{file: f, node: n}
			switch n := n.(type) {
			case *ast.Package, *ast.ImportDecl, *ast.CommentGroup:
				continue
			case *ast.Field:
				d.names = labelNames(n.Label)
			case *ast.LetClause:
				d.names = []string{n.Ident.Name}
			}
			pk.decls = append(pk.decls, d)
			for _, name := range d.names {
				pk.byName[name] = append(pk.byName[name], d)
			}
		}
		return nil
	})
	if err != nil {
		return st, err
	}

	// Transitive closure from the roots.
	kept := map[ast.Decl]bool{}
	used := map[pkgKey]bool{}
	var queue []*decl
	keep := func(r ref) {
		pk := pkgs[r.pkg]
		if pk == nil {
			return
		}
		var ds []*decl
		switch {
		case r.name == "":
			ds = pk.decls
		case !used[r.pkg]:
			// Declarations that bind no name (embeddings, comprehensions)
			// are part of the package's value: keep them once it is used.
			for _, d := range pk.decls {
				if d.names == nil {
					ds = append(ds, d)
				}
			}
			fallthrough
		default:
			ds = append(ds, pk.byName[r.name]...)
		}
		used[r.pkg] = true
		for _, d := range ds {
			if !kept[d.node] {
				kept[d.node] = true
				queue = append(queue, d)
			}
		}
	}
	for _, f := range rootFiles {
		for _, n := range f.ast.Decls {
			refs(f, nil, n, keep)
		}
	}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		pk := pkgs[d.file.pkg]
		refs(d.file, pk, d.node, keep)
	}

	// Rewrite, in a fixed order.
	var files []*file
	for _, pk := range pkgs {
		files = append(files, pk.files...)
		for _, d := range pk.decls {
			st.decls++
			if kept[d.node] {
				st.keptDecls++
			}
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	live := map[pkgKey]bool{}
	for _, f := range files {
		out, err := rewrite(f, kept)
		if err != nil {
			return st, err
		}
		switch {
		case out == nil:
			st.deleted++
			if !dryRun {
				if err := os.Remove(f.path); err != nil {
					return st, err
				}
			}
		case !bytes.Equal(out, f.src):
			st.rewritten++
			live[f.pkg] = true
			st.bytesAfter += len(out)
			if !dryRun {
				if err := os.WriteFile(f.path, out, 0o644); err != nil {
					return st, err
				}
			}
		default:
			live[f.pkg] = true
			st.bytesAfter += len(out)
		}
	}
	st.keptPkgs = len(live)
	if !dryRun {
		if err := removeEmptyDirs(genDir); err != nil {
			return st, err
		}
	}
	return st, nil
}

// parse reads one CUE file. rel is its directory below cue.mod/gen ("" for a
// module file).
func parse(genDir, p, rel string) (*file, error) {
	src, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	a, err := parser.ParseFile(p, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	f := &file{path: p, src: src, ast: a, pkg: pkgKey{rel, a.PackageName()}, imports: map[*ast.ImportSpec]pkgKey{}}
	for spec := range a.ImportSpecs() {
		s, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: import %s: %v", p, spec.Path.Value, err)
		}
		ip := ast.ParseImportPath(s)
		dir := filepath.Join(genDir, filepath.FromSlash(ip.Path))
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue // a builtin package, or one that is not generated
		}
		f.imports[spec] = pkgKey{ip.Path, ip.Qualifier}
	}
	return f, nil
}

// labelNames are the identifiers a top-level label binds: the field name (for
// an identifier or a string label) and a label alias.
func labelNames(l ast.Label) []string {
	names := []string{}
	if a, ok := l.(*ast.Alias); ok {
		names = append(names, a.Ident.Name)
		l, _ = a.Expr.(ast.Label)
	}
	switch l := l.(type) {
	case *ast.Ident:
		names = append(names, l.Name)
	case *ast.BasicLit:
		if s, err := strconv.Unquote(l.Value); err == nil {
			names = append(names, s)
		}
	default:
		return nil // a pattern or dynamic label: always kept
	}
	return names
}

// refs reports every declaration that node n of file f refers to: qualified
// references through f's imports and, when pk is not nil, identifiers naming
// one of pk's top-level declarations. Labels are names, not references, and are
// skipped unless they are expressions (patterns, dynamic labels).
func refs(f *file, pk *pkg, n ast.Node, keep func(ref)) {
	ast.Walk(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Field:
			walkLabel(f, pk, n.Label, keep)
			refs(f, pk, n.Value, keep)
			return false
		case *ast.LetClause:
			refs(f, pk, n.Expr, keep)
			return false
		case *ast.Alias:
			refs(f, pk, n.Expr, keep)
			return false
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok {
				if spec, ok := x.Node.(*ast.ImportSpec); ok {
					if key, ok := f.imports[spec]; ok {
						if sel, ok := n.Sel.(*ast.Ident); ok {
							keep(ref{key, sel.Name})
						} else {
							keep(ref{key, ""})
						}
					}
					return false
				}
			}
			// A selector of a local value (x.y): only x can be a reference.
			refs(f, pk, n.X, keep)
			return false
		case *ast.Ident:
			if spec, ok := n.Node.(*ast.ImportSpec); ok {
				if key, ok := f.imports[spec]; ok {
					keep(ref{key, ""}) // the whole package used as a value
				}
				return false
			}
			if pk != nil {
				if _, ok := pk.byName[n.Name]; ok {
					keep(ref{pk.key, n.Name})
				}
			}
		case *ast.Attribute, *ast.CommentGroup:
			return false
		}
		return true
	}, nil)
}

func walkLabel(f *file, pk *pkg, l ast.Label, keep func(ref)) {
	if a, ok := l.(*ast.Alias); ok {
		l, _ = a.Expr.(ast.Label)
	}
	switch l.(type) {
	case *ast.Ident, *ast.BasicLit, nil:
		return
	}
	refs(f, pk, l, keep)
}

// rewrite returns the file with only its kept declarations and the imports
// they use, nil when nothing is kept, or the original bytes when nothing
// changes.
func rewrite(f *file, kept map[ast.Decl]bool) ([]byte, error) {
	var out []ast.Decl
	dropped, any := false, false
	for _, n := range f.ast.Decls {
		switch n.(type) {
		case *ast.Package, *ast.ImportDecl, *ast.CommentGroup:
			out = append(out, n)
			continue
		}
		if kept[n] {
			out = append(out, n)
			any = true
		} else {
			dropped = true
		}
	}
	if !any {
		return nil, nil
	}
	if !dropped {
		return f.src, nil
	}
	// The imports still referenced by what is left.
	used := map[*ast.ImportSpec]bool{}
	for _, n := range out {
		if _, ok := n.(*ast.ImportDecl); ok {
			continue
		}
		ast.Walk(n, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				if spec, ok := id.Node.(*ast.ImportSpec); ok {
					used[spec] = true
				}
			}
			return true
		}, nil)
	}
	decls := out[:0]
	for _, n := range out {
		if id, ok := n.(*ast.ImportDecl); ok {
			specs := id.Specs[:0]
			for _, s := range id.Specs {
				if used[s] {
					specs = append(specs, s)
				}
			}
			if len(specs) == 0 {
				continue
			}
			id.Specs = specs
		}
		decls = append(decls, n)
	}
	f.ast.Decls = decls
	b, err := format.Node(f.ast)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", f.path, err)
	}
	return b, nil
}

// removeEmptyDirs removes the directories below root (not root itself) that
// hold nothing.
func removeEmptyDirs(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != root {
			dirs = append(dirs, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	// Deepest first.
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			return err
		}
		if len(ents) == 0 {
			if err := os.Remove(d); err != nil {
				return err
			}
		}
	}
	return nil
}
