// Package cabi holds the layout oracle for package uverbs: a cgo table, generated from the DWARF
// of the installed uapi headers and evaluated by the C compiler (offsetof, sizeof), that the
// package's test compares field by field with the Go structs cgo -godefs generated. It exists
// as its own package so that package uverbs itself never needs cgo.
package cabi

// Row is one field of a C struct as the C compiler lays it out. A Row with an empty Field
// carries the size of the whole struct in Size.
type Row struct {
	CType string  // C struct name without the "struct " keyword
	Field string  // field path as offsetof accepts it (dotted for anonymous nested structs)
	Off   uintptr // offsetof
	Size  uintptr // sizeof the field; 0 for flexible array members
	Flex  bool    // a flexible (or zero-length) array member: where driver data begins
}
