package vmtest

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// moduleName normalises a module name the way the kernel does: '-' and '_' are the same.
func moduleName(s string) string { return strings.ReplaceAll(s, "-", "_") }

// indexModules maps every module name under modDir/kernel to its path relative to modDir.
func indexModules(modDir string) (map[string]string, error) {
	idx := map[string]string{}
	err := filepath.WalkDir(filepath.Join(modDir, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ko") {
			rel, err := filepath.Rel(modDir, p)
			if err != nil {
				return err
			}
			idx[moduleName(strings.TrimSuffix(d.Name(), ".ko"))] = rel
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("vmtest: index modules: %w", err)
	}
	return idx, nil
}

// modinfoDepends reads the depends= entry of a module's .modinfo section (NUL-separated
// key=value strings written by modpost).
func modinfoDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vmtest: module %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("vmtest: module %s has no .modinfo section", filepath.Base(path))
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("vmtest: module %s: %w", filepath.Base(path), err)
	}
	var deps []string
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			for _, d := range strings.Split(string(v), ",") {
				if d != "" {
					deps = append(deps, moduleName(d))
				}
			}
		}
	}
	return deps, nil
}

// moduleOrder returns the dependency closure of want in load order (every module after the
// ones it depends on, want's order otherwise kept). deps returns one module's direct
// dependencies; a module whose name is not found is an error, since the kernel would refuse
// to load anything that needs it.
func moduleOrder(want []string, deps func(name string) ([]string, error)) ([]string, error) {
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string, path []string) error
	visit = func(name string, path []string) error {
		switch state[name] {
		case 2:
			return nil
		case 1:
			return fmt.Errorf("vmtest: module dependency cycle: %s", strings.Join(append(path, name), " -> "))
		}
		state[name] = 1
		ds, err := deps(name)
		if err != nil {
			return err
		}
		for _, d := range ds {
			if err := visit(d, append(path, name)); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, name)
		return nil
	}
	for _, w := range want {
		if err := visit(moduleName(w), nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// moduleClosure resolves want against an unpacked kernel: load order and, per module, its
// path relative to the module directory.
func moduleClosure(modDir string, want []string) (order []string, paths map[string]string, err error) {
	idx, err := indexModules(modDir)
	if err != nil {
		return nil, nil, err
	}
	builtin := builtinModules(modDir)
	var loadable []string
	for _, w := range want {
		if !builtin[moduleName(w)] {
			loadable = append(loadable, w)
		}
	}
	order, err = moduleOrder(loadable, func(name string) ([]string, error) {
		rel, ok := idx[name]
		if !ok {
			return nil, fmt.Errorf("vmtest: module %s not found under %s", name, filepath.Base(modDir))
		}
		return modinfoDepends(filepath.Join(modDir, rel))
	})
	if err != nil {
		return nil, nil, err
	}
	paths = map[string]string{}
	for _, m := range order {
		paths[m] = idx[m]
	}
	return order, paths, nil
}

// builtinModules reads modules.builtin: modules compiled into this kernel need no loading.
func builtinModules(modDir string) map[string]bool {
	out := map[string]bool{}
	data, err := os.ReadFile(filepath.Join(modDir, "modules.builtin"))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" {
			out[moduleName(strings.TrimSuffix(filepath.Base(line), ".ko"))] = true
		}
	}
	return out
}
