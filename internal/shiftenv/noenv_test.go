package shiftenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// libraries are the module's library trees: their non-test Go files must not read the
// environment. Only the edges do (this package's callers): the plugin, shiftctl, the demo.
var libraries = []string{"failover", "fence", "probe", "provider", "mlx5", "uverbs"}

// edges are the directories under libraries allowed to read the environment, with why.
var edges = map[string]string{
	"provider/plugin":                "the libibverbs plugin, an edge",
	"mlx5/emu/kernelso":              "the emulated kernel library (libmlx5-emu-kernel.so), an edge: SHIFT_EMU_DEBUG, SHIFT_EMU_KERNEL",
	"uverbs/internal/cabi/genlayout": "a go:generate program: CC",
}

// edgeFiles are single files allowed to read one documented test knob.
var edgeFiles = map[string]string{
	"uverbs/registry.go": "SYSFS_PATH, the sysfs root for device discovery, as libibverbs reads it (README: tests and tools)",
}

// envFuncs are the functions that read the environment, by package path.
var envFuncs = map[string][]string{
	"os":                    {"Getenv", "LookupEnv", "Environ", "ExpandEnv"},
	"syscall":               {"Getenv", "Environ"},
	"golang.org/x/sys/unix": {"Getenv", "Environ"},
}

// TestLibrariesReadNoEnvironment parses every non-test Go file of the library trees and fails
// on a use of os.Getenv, os.LookupEnv, os.Environ (or their syscall and unix twins), called
// or passed as a value, outside the edges: settings are read once, at the edge, into Options.
func TestLibrariesReadNoEnvironment(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", root, err)
	}
	used := map[string]bool{}
	fset := token.NewFileSet()
	for _, lib := range libraries {
		err := filepath.WalkDir(filepath.Join(root, lib), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if _, ok := edges[rel]; ok {
					used[rel] = true
					return filepath.SkipDir
				}
				if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, hit := range envReads(f) {
				if _, ok := edgeFiles[rel]; ok {
					used[rel] = true
					continue
				}
				t.Errorf("%s:%d: %s: a library reads the environment; take an Options field and read the variable at the edge (internal/shiftenv)",
					rel, fset.Position(hit.Pos()).Line, hit.name)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []map[string]string{edges, edgeFiles} {
		for p := range m {
			if !used[p] {
				t.Errorf("allow-list entry %s: no such directory, or the file reads no environment any more: remove it", p)
			}
		}
	}
}

type envRead struct {
	ast.Node
	name string
}

// envReads are f's references to an environment-reading function (envFuncs), through the
// name f imports its package under.
func envReads(f *ast.File) []envRead {
	local := map[string]string{} // local name → package path
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		if _, ok := envFuncs[p]; !ok {
			continue
		}
		name := filepath.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		local[name] = p
	}
	var out []envRead
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		if p, ok := local[x.Name]; ok && slices.Contains(envFuncs[p], sel.Sel.Name) {
			out = append(out, envRead{sel, x.Name + "." + sel.Sel.Name})
		}
		return true
	})
	return out
}

// The checker finds what it is meant to find.
func TestEnvReads(t *testing.T) {
	src := `package p
import (
	"os"
	sys "syscall"
)
var g = os.Getenv
func f() { _, _ = os.LookupEnv("A"); _ = sys.Environ(); _ = os.Getpid() }
`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range envReads(f) {
		names = append(names, r.name)
	}
	if want := []string{"os.Getenv", "os.LookupEnv", "sys.Environ"}; !slices.Equal(names, want) {
		t.Errorf("found %v, want %v", names, want)
	}
}
