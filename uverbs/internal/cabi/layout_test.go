//go:build cgo

package cabi

import (
	"reflect"
	"strings"
	"testing"
)

// goRow is one leaf field of a Go struct, flattened like cRows: fields whose type is not itself
// a checked ABI struct (the anonymous per_transport_caps) are expanded.
type goRow struct {
	path      string
	off, size uintptr
}

func goFields(t reflect.Type, prefix string, base uintptr, checked map[reflect.Type]bool) []goRow {
	var rows []goRow
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Name == "_" {
			continue // explicit padding cgo -godefs inserts; C has no member there
		}
		if f.Type.Kind() == reflect.Struct && !checked[f.Type] {
			rows = append(rows, goFields(f.Type, prefix+f.Name+".", base+f.Offset, checked)...)
			continue
		}
		rows = append(rows, goRow{prefix + f.Name, base + f.Offset, f.Type.Size()})
	}
	return rows
}

// nameMatches accepts the Go name cgo -godefs derived from a C field: the same name with the
// first letter upper-cased, possibly with a prefix shared by all fields removed (event_type ->
// Type).
func nameMatches(goPath, cPath string) bool {
	g := strings.Split(strings.ToLower(goPath), ".")
	c := strings.Split(strings.ToLower(cPath), ".")
	if len(g) != len(c) {
		return false
	}
	for i := range g {
		if !strings.HasSuffix(c[i], g[i]) {
			return false
		}
	}
	return true
}

func TestLayoutMatchesHeaders(t *testing.T) {
	checked := map[reflect.Type]bool{}
	for _, gt := range goTypes {
		checked[gt] = true
	}
	byType := map[string][]Row{}
	var order []string
	for _, r := range cRows() {
		if _, ok := byType[r.CType]; !ok {
			order = append(order, r.CType)
		}
		byType[r.CType] = append(byType[r.CType], r)
	}
	if len(order) != len(goTypes) {
		t.Fatalf("C table has %d structs, Go map %d", len(order), len(goTypes))
	}
	nfields := 0
	for _, cname := range order {
		gt := goTypes[cname]
		if gt == nil {
			t.Errorf("struct %s: no Go type", cname)
			continue
		}
		var crows []Row
		var size uintptr
		for _, r := range byType[cname] {
			switch {
			case r.Field == "":
				size = r.Size
			case r.Flex:
				// Driver data begins where the core struct ends.
				if r.Off != gt.Size() {
					t.Errorf("%s.%s: flexible array at C offset %d, Go %s ends at %d", cname, r.Field, r.Off, gt, gt.Size())
				}
			default:
				crows = append(crows, r)
			}
		}
		if size != gt.Size() {
			t.Errorf("sizeof(struct %s) = %d, Go %s = %d", cname, size, gt, gt.Size())
		}
		grows := goFields(gt, "", 0, checked)
		if len(grows) != len(crows) {
			t.Errorf("struct %s has %d fields, Go %s has %d", cname, len(crows), gt, len(grows))
			continue
		}
		for i, c := range crows {
			g := grows[i]
			if !nameMatches(g.path, c.Field) {
				t.Errorf("struct %s field %d: C %q, Go %s.%s", cname, i, c.Field, gt, g.path)
			}
			if g.off != c.Off || g.size != c.Size {
				t.Errorf("%s.%s: C offset %d size %d, Go %s.%s offset %d size %d",
					cname, c.Field, c.Off, c.Size, gt, g.path, g.off, g.size)
			}
			nfields++
		}
	}
	t.Logf("checked %d structs, %d fields against the C headers", len(order), nfields)
}
