package docsnippets

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"slices"
	"testing"
)

// freeNames returns the names that the nodes use and do not declare, in
// the order of first use, leaving out the universe's (nil, error, len).
// The nodes are a file's declarations, whose names are in scope everywhere
// in them, or a function body. A name is declared from the statement that
// declares it to the end of its block, as in Go; the selector after a dot,
// a struct's field names and the field name before a colon in a composite
// literal are not uses of a name.
func freeNames(nodes ...ast.Node) []string {
	var free []string
	use := func(sc *scope, name string) {
		if name != "_" && !sc.has(name) && types.Universe.Lookup(name) == nil && !slices.Contains(free, name) {
			free = append(free, name)
		}
	}
	file := &scope{}
	for _, n := range nodes {
		switch d := n.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				file.declare(d.Name)
			}
		case *ast.GenDecl:
			for _, sp := range d.Specs {
				switch sp := sp.(type) {
				case *ast.ValueSpec:
					file.declare(sp.Names...)
				case *ast.TypeSpec:
					file.declare(sp.Name)
				}
			}
		}
	}
	var walk func(n ast.Node, sc *scope)
	// children walks n's children in sc.
	children := func(n ast.Node, sc *scope) {
		ast.Inspect(n, func(c ast.Node) bool {
			if c == n {
				return true
			}
			if c != nil {
				walk(c, sc)
			}
			return false
		})
	}
	// fields walks the types of a list of fields and declares their names in
	// into, when into is not nil.
	fields := func(fl *ast.FieldList, sc, into *scope) {
		if fl == nil {
			return
		}
		for _, f := range fl.List {
			walk(f.Type, sc)
			if into != nil {
				into.declare(f.Names...)
			}
		}
	}
	walk = func(n ast.Node, sc *scope) {
		switch n := n.(type) {
		case *ast.Ident:
			use(sc, n.Name)
		case *ast.SelectorExpr:
			walk(n.X, sc)
		case *ast.KeyValueExpr:
			if _, ok := n.Key.(*ast.Ident); !ok {
				walk(n.Key, sc)
			}
			walk(n.Value, sc)
		case *ast.StructType:
			fields(n.Fields, sc, nil)
		case *ast.InterfaceType:
			fields(n.Methods, sc, nil)
		case *ast.FuncType:
			fields(n.TypeParams, sc, nil)
			fields(n.Params, sc, nil)
			fields(n.Results, sc, nil)
		case *ast.FuncDecl:
			inner := sc.open()
			fields(n.Recv, sc, inner)
			fields(n.Type.TypeParams, sc, inner)
			fields(n.Type.Params, sc, inner)
			fields(n.Type.Results, sc, inner)
			if n.Body != nil {
				walk(n.Body, inner)
			}
		case *ast.FuncLit:
			inner := sc.open()
			fields(n.Type.Params, sc, inner)
			fields(n.Type.Results, sc, inner)
			walk(n.Body, inner)
		case *ast.AssignStmt:
			for _, e := range n.Rhs {
				walk(e, sc)
			}
			for _, e := range n.Lhs {
				if id, ok := e.(*ast.Ident); ok && n.Tok == token.DEFINE {
					sc.declare(id)
				} else {
					walk(e, sc)
				}
			}
		case *ast.ValueSpec:
			if n.Type != nil {
				walk(n.Type, sc)
			}
			for _, v := range n.Values {
				walk(v, sc)
			}
			sc.declare(n.Names...)
		case *ast.TypeSpec:
			sc.declare(n.Name)
			fields(n.TypeParams, sc, nil)
			walk(n.Type, sc)
		case *ast.ImportSpec, *ast.BranchStmt:
		case *ast.LabeledStmt:
			walk(n.Stmt, sc)
		case *ast.RangeStmt:
			walk(n.X, sc)
			inner := sc.open()
			for _, e := range []ast.Expr{n.Key, n.Value} {
				if id, ok := e.(*ast.Ident); ok && n.Tok == token.DEFINE {
					inner.declare(id)
				} else if e != nil {
					walk(e, sc)
				}
			}
			walk(n.Body, inner)
		case *ast.BlockStmt, *ast.IfStmt, *ast.ForStmt, *ast.SwitchStmt, *ast.TypeSwitchStmt,
			*ast.CaseClause, *ast.CommClause, *ast.SelectStmt:
			children(n, sc.open())
		default:
			children(n, sc)
		}
	}
	for _, n := range nodes {
		walk(n, file)
	}
	return free
}

// scope is a block's declared names, for freeNames.
type scope struct {
	names  map[string]bool
	parent *scope
}

// open returns a scope inside sc.
func (sc *scope) open() *scope { return &scope{parent: sc} }

// declare declares the names in sc.
func (sc *scope) declare(ids ...*ast.Ident) {
	if sc.names == nil {
		sc.names = make(map[string]bool)
	}
	for _, id := range ids {
		sc.names[id.Name] = true
	}
}

// has reports whether name is declared in sc or a scope around it.
func (sc *scope) has(name string) bool {
	for ; sc != nil; sc = sc.parent {
		if sc.names[name] {
			return true
		}
	}
	return false
}

// topLevelVars returns the names a function body declares at its top
// level, which a generated file then uses so that a snippet that only shows
// how to get a value compiles.
func topLevelVars(body *ast.BlockStmt) []string {
	var names []string
	add := func(id *ast.Ident) {
		if id.Name != "_" && !slices.Contains(names, id.Name) {
			names = append(names, id.Name)
		}
	}
	for _, st := range body.List {
		switch st := st.(type) {
		case *ast.AssignStmt:
			if st.Tok == token.DEFINE {
				for _, e := range st.Lhs {
					if id, ok := e.(*ast.Ident); ok {
						add(id)
					}
				}
			}
		case *ast.DeclStmt:
			if gd, ok := st.Decl.(*ast.GenDecl); ok && gd.Tok == token.VAR {
				for _, sp := range gd.Specs {
					for _, id := range sp.(*ast.ValueSpec).Names {
						add(id)
					}
				}
			}
		}
	}
	return names
}

func TestFreeNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string // a function body
		want []string
	}{
		{name: "Call", src: `err := advisory.Lock(ctx, conn, key); _ = err`, want: []string{"advisory", "ctx", "conn", "key"}},
		{name: "SelectorAndUniverse", src: `var x error = nil; _ = len(db.Stats().Idle); _ = x`, want: []string{"db"}},
		{name: "FuncLiteral", src: `f := func(ctx context.Context, tx *sql.Tx) error { return use(tx) }; _ = f`, want: []string{"context", "sql", "use"}},
		{name: "CompositeLiteralFields", src: `_ = advisory.LockerConfig{MaxConns: n}`, want: []string{"advisory", "n"}},
		{name: "Range", src: `for _, s := range steps { _ = s }; _ = s`, want: []string{"steps", "s"}},
		{name: "Labels", src: `loop: for { break loop }`, want: nil},
		{name: "LocalShadowsCommon", src: `mux := http.NewServeMux(); mux.Handle("/", h)`, want: []string{"http", "h"}},
		{name: "ParamsAreLocal", src: `f := func(ctx context.Context) { _ = ctx }; f(ctx)`, want: []string{"context", "ctx"}},
		{name: "UsedBeforeDeclared", src: `use(x); x := 1; _ = x`, want: []string{"use", "x"}},
		{name: "BlockEnds", src: `if ok := f(); ok { y := 1; _ = y }; _ = y; _ = ok`, want: []string{"f", "y", "ok"}},
		{name: "StructFields", src: `var v struct{ ID string }; _ = v.ID`, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := parser.ParseFile(token.NewFileSet(), "f.go", "package p\nfunc _() {\n"+tt.src+"\n}\n", 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := freeNames(f.Decls[0].(*ast.FuncDecl).Body); !slices.Equal(got, tt.want) {
				t.Fatalf("freeNames = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestTopLevelVars(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "f.go", `package p
func _() {
	a, _ := f()
	var b, c = 1, 2
	a, d := g()
	if x := 1; x > 0 { e := 2; _ = e }
}
`, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := topLevelVars(f.Decls[0].(*ast.FuncDecl).Body), []string{"a", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("topLevelVars = %q; want %q", got, want)
	}
}

func TestFreeNamesOfDeclarations(t *testing.T) {
	t.Parallel()
	src := `package p
var testDB = open()
func (s *orders) Pay(ctx context.Context, req *pb.PayRequest) error { return use(ctx, s, req, testDB, helper) }
func helper() {}
type T struct{ Field int }
`
	f, err := parser.ParseFile(token.NewFileSet(), "f.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []ast.Node
	for _, d := range f.Decls {
		nodes = append(nodes, d)
	}
	if got, want := freeNames(nodes...), []string{"open", "orders", "context", "pb", "use"}; !slices.Equal(got, want) {
		t.Fatalf("freeNames = %q; want %q", got, want)
	}
}
