package docsnippets

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// minSnippets is fewer Go blocks than the docs hold: finding fewer means
// the extraction broke, not that the docs are fine.
const minSnippets = 25

// generated is one snippet's package, its files by name.
type generated struct {
	dir   string            // relative to this package's directory
	files map[string]string // file name → source
}

// generate lays out s as the package named name: the snippet as a file of
// its own when it parses as one (declarations), or else as the body of a
// function returning error; the imports its free names need; and a second
// file with the common declarations it uses. //line directives make the
// compiler report errors at the snippet's lines in its Markdown file, which
// is at abs.
func generate(s snippet, name, abs string) (generated, error) {
	at := "//line " + abs + ":" + strconv.Itoa(s.line) + ":1\n"
	asFile := at + s.code + "\n"
	f, err := parser.ParseFile(token.NewFileSet(), "", "package "+name+"\n"+asFile, parser.SkipObjectResolution)
	var nodes []ast.Node
	var body string
	if err == nil {
		for _, d := range f.Decls {
			nodes = append(nodes, d)
		}
		body = asFile
	} else {
		imports, rest := splitImports(s.code)
		fn := "\nfunc snippet() error {\n" + at + rest + "\n//line generated.go:1:1\n"
		fb, berr := parser.ParseFile(token.NewFileSet(), "", "package "+name+"\n"+imports+fn+"\treturn nil\n}\n", parser.SkipObjectResolution)
		if berr != nil {
			if declarations.MatchString(rest) {
				return generated{}, fmt.Errorf("not Go declarations: %v", err)
			}
			return generated{}, fmt.Errorf("not Go statements: %v", berr)
		}
		f = fb
		fd := f.Decls[len(f.Decls)-1].(*ast.FuncDecl)
		nodes = append(nodes, fd.Body)
		for _, v := range topLevelVars(fd.Body) {
			fn += "\t_ = " + v + "\n" // a snippet may show how to get a value and stop there
		}
		body = imports + fn + "\treturn nil\n}\n"
	}

	explicit := make(map[string]bool)
	for _, im := range f.Imports {
		explicit[importName(im)] = true
	}
	var imports, decls []string
	var want func(names []string)
	want = func(names []string) {
		for _, n := range names {
			if explicit[n] {
				continue
			}
			if src, ok := common[n]; ok {
				if !slices.Contains(decls, n) {
					decls = append(decls, n)
					want(freeNames(parseDecl(src)))
				}
				continue
			}
			if _, ok := packages[n]; ok && !slices.Contains(imports, n) {
				imports = append(imports, n)
			}
		}
	}
	want(freeNames(nodes...))

	// The snippet's file imports what the snippet uses; the common file what
	// its declarations use.
	snippetImports := slices.DeleteFunc(slices.Clone(imports), func(p string) bool { return !slices.Contains(freeNames(nodes...), p) })
	g := generated{dir: genDir + "/" + name, files: map[string]string{
		"snippet.go": "package " + name + "\n\n" + importBlock(snippetImports) + body,
	}}
	if len(decls) > 0 {
		var cnodes []ast.Node
		var src strings.Builder
		slices.Sort(decls)
		for _, d := range decls {
			cnodes = append(cnodes, parseDecl(common[d]))
			src.WriteString(common[d] + "\n\n")
		}
		g.files["common.go"] = "package " + name + "\n\n" + importBlock(freePackages(cnodes)) + src.String()
	}
	return g, nil
}

// declarations matches a snippet that begins as declarations do, for
// the message when it parses neither as declarations nor as statements.
var declarations = regexp.MustCompile(`^\s*(//.*\n\s*)*(func|type)\s`)

// freePackages returns the names of packages that nodes use.
func freePackages(nodes []ast.Node) []string {
	return slices.DeleteFunc(freeNames(nodes...), func(n string) bool { _, ok := packages[n]; return !ok })
}

// importBlock returns an import declaration of the named packages.
func importBlock(names []string) string {
	if len(names) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("import (\n")
	for _, n := range names {
		b.WriteString("\t" + n + " " + strconv.Quote(packages[n]) + "\n")
	}
	b.WriteString(")\n\n")
	return b.String()
}

// parseDecl parses one of the common declarations.
func parseDecl(src string) ast.Node {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+src, parser.SkipObjectResolution)
	if err != nil {
		panic(fmt.Sprintf("docsnippets: common declaration %q: %v", src, err))
	}
	return f.Decls[0]
}

// importName returns the name an import declares.
func importName(im *ast.ImportSpec) string {
	if im.Name != nil {
		return im.Name.Name
	}
	p, _ := strconv.Unquote(im.Path.Value)
	base := path.Base(p)
	if regexp.MustCompile(`^v[0-9]+$`).MatchString(base) {
		base = path.Base(path.Dir(p))
	}
	return base
}

// splitImports takes the import declarations from the head of code, for a
// snippet that shows its imports before its statements. The rest keeps a
// blank line for each line taken, so that its lines stay where they were.
func splitImports(code string) (imports, rest string) {
	lines := strings.Split(code, "\n")
	var im []string
	i := 0
	for ; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case l == "":
			continue
		case l == "import (":
			j := i
			for ; j < len(lines) && strings.TrimSpace(lines[j]) != ")"; j++ {
			}
			if j == len(lines) {
				return strings.Join(im, "\n"), strings.Join(lines, "\n")
			}
			im = append(im, lines[i:j+1]...)
			for k := i; k <= j; k++ {
				lines[k] = ""
			}
			i = j
			continue
		case strings.HasPrefix(l, "import "):
			im = append(im, lines[i])
			lines[i] = ""
			continue
		}
		break
	}
	if len(im) > 0 {
		return strings.Join(im, "\n") + "\n", strings.Join(lines, "\n")
	}
	return "", code
}

// docs returns the Markdown files whose snippets are checked, relative to
// the module's root.
func docs(t *testing.T, root string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, f := range files {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// buildHeader starts the go command's errors for one package.
var buildHeader = regexp.MustCompile(`^# (\S+)`)

// TestSnippetsCompile type-checks every Go block of README.md and docs/*.md
// against the module, with one go build for them all: each snippet is a
// package of its own, laid out through an overlay (no file is written into
// the tree), so that snippets declaring the same names do not collide.
func TestSnippetsCompile(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	var all []snippet
	for _, file := range docs(t, root) {
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		s, err := extract(file, string(text))
		if err != nil {
			t.Error(err)
		}
		all = append(all, s...)
	}
	if len(all) < minSnippets {
		t.Fatalf("found %d Go blocks in the docs; want at least %d", len(all), minSnippets)
	}

	tmp := t.TempDir()
	replace := make(map[string]string)
	overlay := func(rel, src string) {
		file := filepath.Join(tmp, strings.ReplaceAll(rel, "/", "_"))
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		replace[filepath.Join(wd, filepath.FromSlash(rel))] = file
	}
	overlay(genDir+"/pb/pb.go", pbSource)

	bySnippet := make(map[string]snippet) // import path → snippet
	pkgs := make(map[string][]string)     // module directory → its snippets' packages
	for i, s := range all {
		if s.skip != "" {
			continue
		}
		name := fmt.Sprintf("s%03d", i)
		g, err := generate(s, name, filepath.Join(root, filepath.FromSlash(s.file)))
		if err != nil {
			t.Errorf("%s: %s; mark a block that is not Go with <!-- snippet: skip (reason) -->",
				s.pos(), strings.ReplaceAll(err.Error(), root+string(filepath.Separator), ""))
			continue
		}
		mod := snippetModule(root, s.code)
		if mod == "" {
			for _, f := range slices.Sorted(maps.Keys(g.files)) {
				overlay(g.dir+"/"+f, g.files[f])
			}
			pkgs[""] = append(pkgs[""], "./"+g.dir)
			bySnippet[module+"/internal/docsnippets/"+g.dir] = s
			continue
		}
		// A snippet of a nested module's package is built in that
		// module, which requires the library's and the package's own
		// dependencies.
		dir := nestedGenDir + "/" + name
		for _, f := range slices.Sorted(maps.Keys(g.files)) {
			up, err := filepath.Rel(wd, filepath.Join(root, mod, filepath.FromSlash(dir)))
			if err != nil {
				t.Fatal(err)
			}
			overlay(filepath.ToSlash(up)+"/"+f, g.files[f])
		}
		pkgs[mod] = append(pkgs[mod], "./"+dir)
		bySnippet[module+"/"+mod+"/"+dir] = s
	}
	ov, err := json.Marshal(map[string]map[string]string{"Replace": replace})
	if err != nil {
		t.Fatal(err)
	}
	ovFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ovFile, ov, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mod := range slices.Sorted(maps.Keys(pkgs)) {
		cmd := exec.Command("go", append([]string{"build", "-overlay", ovFile}, pkgs[mod]...)...)
		if mod != "" {
			cmd.Dir = filepath.Join(root, mod)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			reportBuild(t, root, wd, string(out), err, bySnippet)
		}
	}
}

// snippetModule returns the directory of the nested module whose package
// a snippet imports (integrations/gooselock, say), or "" for a snippet of
// the library's own module.
func snippetModule(root, code string) string {
	m := nestedImport.FindStringSubmatch(code)
	if m == nil {
		return ""
	}
	if _, err := os.Stat(filepath.Join(root, m[1], "go.mod")); err != nil {
		return ""
	}
	return m[1]
}

// nestedImport finds an import of a package of a nested module.
var nestedImport = regexp.MustCompile(`"` + regexp.QuoteMeta(module) + `/(integrations/[a-z0-9]+)`)

// nestedGenDir is the directory, in a nested module, under which its
// snippets' packages are laid out.
const nestedGenDir = "docsnippetsgen"

// reportBuild reports the errors of one go build of snippets, out, each
// under its snippet's position, with paths relative to the module's root.
func reportBuild(t *testing.T, root, wd, out string, err error, bySnippet map[string]snippet) {
	t.Helper()

	// Report each snippet's errors under its position, with paths relative
	// to the module's root.
	report := make(map[string][]string)
	var order []string
	current := ""
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		if m := buildHeader.FindStringSubmatch(line); m != nil {
			current = m[1]
			if !slices.Contains(order, current) {
				order = append(order, current)
			}
			continue
		}
		line = strings.ReplaceAll(line, root+string(filepath.Separator), "")
		if up, err := filepath.Rel(wd, root); err == nil {
			line = strings.ReplaceAll(line, up+string(filepath.Separator), "")
		}
		report[current] = append(report[current], line)
	}
	for _, p := range order {
		s, ok := bySnippet[p]
		if !ok {
			t.Errorf("go build %s:\n%s", p, strings.Join(report[p], "\n"))
			continue
		}
		t.Errorf("%s: the snippet does not compile:\n%s", s.pos(), strings.Join(report[p], "\n"))
	}
	if rest := report[""]; len(rest) > 0 || len(order) == 0 {
		t.Errorf("go build: %v\n%s", err, strings.Join(rest, "\n"))
	}
}
