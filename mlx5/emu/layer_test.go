package emu_test

import (
	"os/exec"
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
