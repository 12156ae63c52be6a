package emu_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The emulator sits below the provider and SHIFT and must stay independent of them: no
// package under mlx5/emu may import provider, failover, fence or probe, directly or not. The
// one exception is provider/verbs, the verbs contract: value types and interfaces that import
// nothing of the module (checked below), which package mlx5 takes its work completion enums
// from.
func TestLayerRule(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH: cannot list dependencies")
	}
	const module = "github.com/shift-rdma/shift/"
	pkgs, err := exec.Command(goBin, "list", module+"mlx5/emu/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{"provider", "failover", "fence", "probe"}
	list := strings.Fields(string(pkgs))
	if len(list) < 5 {
		t.Fatalf("only %d packages under mlx5/emu listed: %s", len(list), pkgs)
	}
	// One listing of the dependencies of every package and its tests; for each forbidden
	// dependency, name the packages that import it.
	args := append([]string{"list", "-test", "-deps", "-f", "{{.ImportPath}}: {{join .Imports \" \"}}"}, list...)
	out, err := exec.Command(goBin, args...).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const contract = module + "provider/verbs"
	for _, line := range strings.Split(string(out), "\n") {
		pkg, imports, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		for _, dep := range strings.Fields(imports) {
			if pkg == contract && strings.HasPrefix(dep, module) {
				t.Errorf("%s, allowed below the emulator as a leaf, imports %s", contract, dep)
			}
			if dep == contract {
				continue
			}
			for _, f := range forbidden {
				if dep == module+f || strings.HasPrefix(dep, module+f+"/") {
					t.Errorf("%s imports %s", pkg, dep)
				}
			}
		}
	}
}

// TestEmulatorDecodesRingsItself: the emulated device reads WQEs and doorbells and writes
// CQEs with code of its own (mlx5/emu/nic/prm_*.go), so that a mistake in package mlx5's ring
// code, which the providers use, cannot be made identically on the device side. From package
// mlx5 the emulator may use constants, integer types of constants, the kernel ABI (abi.go,
// the bfreg arithmetic and mmap offsets of uar.go), the syndrome table, the error
// constructor and the doorbell wake-up (uarwake.go: a register write's stand-in for the MMIO
// signal, which carries no ring format); not the rings, segments, CQE codecs, doorbell
// records or registers. (emutest, the provider side of the emulator's tests, may.)
func TestEmulatorDecodesRingsItself(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("../*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"GrossBfregIndex": true, "DecodeMmapOffset": true, "MmapOffset": true, "SyndromeForStatus": true}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		whole := filepath.Base(name) == "abi.go" || filepath.Base(name) == "errors.go" || filepath.Base(name) == "uarwake.go"
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							allowed[n.Name] = allowed[n.Name] || d.Tok == token.CONST || whole
						}
					case *ast.TypeSpec:
						_, basic := s.Type.(*ast.Ident)
						basic = basic || s.Assign != 0 // an alias of a verbs type of constants
						allowed[s.Name.Name] = allowed[s.Name.Name] || basic || whole
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil && whole {
					allowed[d.Name.Name] = true
				}
			}
		}
	}
	n := 0
	err = filepath.WalkDir(".", func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (e.Name() == "emutest" || strings.HasSuffix(e.Name(), "test") && path != ".") {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		n++
		ast.Inspect(f, func(x ast.Node) bool {
			if s, ok := x.(*ast.SelectorExpr); ok {
				if id, ok := s.X.(*ast.Ident); ok && id.Name == "mlx5" && !allowed[s.Sel.Name] {
					t.Errorf("%s: uses mlx5.%s: the device decodes its rings with code of its own", fset.Position(s.Pos()), s.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 20 {
		t.Fatalf("only %d files of the emulator checked", n)
	}
}
