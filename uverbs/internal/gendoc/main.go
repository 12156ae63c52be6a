// Command gendoc documents the declarations cgo -godefs wrote into uverbs/ztypes_linux.go.
//
// cgo -godefs drops every comment of its input, so the generated structs and constants would
// be undocumented. gendoc puts them back: each struct type gets a comment naming the C struct
// it mirrors and the header that defines it (found by reading the headers the input
// includes), and each constant block gets the comment its block carries in the input. It
// runs from uverbs/gen.sh after cgo -godefs.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

func main() {
	in := flag.String("types", "", "cgo -godefs input file")
	out := flag.String("z", "", "generated Go file to document in place")
	inc := flag.String("include", "/usr/include", "directory the input's #include <...> lines resolve against")
	flag.Parse()
	if err := run(*in, *out, *inc); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}

// input is what the cgo -godefs input says about each declaration.
type input struct {
	cStruct map[string]string // Go type name → C struct name
	consts  []string          // doc comment of each const block, in order
	headers []string          // the preamble's #include <...> names, in order
}

func run(in, out, inc string) error {
	src, err := readInput(in)
	if err != nil {
		return err
	}
	zsrc, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	fset := token.NewFileSet()
	zf, err := parser.ParseFile(fset, out, zsrc, parser.ParseComments)
	if err != nil {
		return err
	}
	type insert struct {
		off  int
		text string
	}
	var ins []insert
	block := 0
	for _, d := range zf.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		switch g.Tok {
		case token.TYPE:
			if g.Doc != nil {
				continue
			}
			ts := g.Specs[0].(*ast.TypeSpec)
			c, ok := src.cStruct[ts.Name.Name]
			if !ok {
				continue
			}
			text := fmt.Sprintf("// %s mirrors struct %s", ts.Name.Name, c)
			if h := headerOf(inc, src.headers, c); h != "" {
				text += fmt.Sprintf(" (<%s>)", h)
			}
			ins = append(ins, insert{fset.Position(g.Pos()).Offset, text + ".\n"})
		case token.CONST:
			if block >= len(src.consts) {
				return fmt.Errorf("%s has more const blocks than %s", out, in)
			}
			if doc := src.consts[block]; doc != "" && g.Doc == nil {
				ins = append(ins, insert{fset.Position(g.Pos()).Offset, doc})
			}
			block++
		}
	}
	if block != len(src.consts) {
		return fmt.Errorf("%s has %d const blocks, %s has %d", out, block, in, len(src.consts))
	}
	sort.Slice(ins, func(i, j int) bool { return ins[i].off > ins[j].off })
	for _, x := range ins {
		zsrc = append(zsrc[:x.off], append([]byte(x.text), zsrc[x.off:]...)...)
	}
	formatted, err := format.Source(zsrc)
	if err != nil {
		return err
	}
	return os.WriteFile(out, formatted, 0o644)
}

var includeRE = regexp.MustCompile(`(?m)^#include <([^>]+)>`)

func readInput(in string) (*input, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, in, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	src := &input{cStruct: map[string]string{}}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		switch g.Tok {
		case token.IMPORT:
			if g.Doc != nil {
				for _, m := range includeRE.FindAllStringSubmatch(g.Doc.Text(), -1) {
					src.headers = append(src.headers, m[1])
				}
			}
		case token.TYPE:
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				if sel, ok := ts.Type.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "struct_") {
					src.cStruct[ts.Name.Name] = strings.TrimPrefix(sel.Sel.Name, "struct_")
				}
			}
		case token.CONST:
			doc := ""
			if g.Doc != nil {
				for _, c := range g.Doc.List {
					doc += c.Text + "\n"
				}
			}
			src.consts = append(src.consts, doc)
		}
	}
	return src, nil
}

// headerOf returns the first included header that defines struct name, or "".
func headerOf(inc string, headers []string, name string) string {
	def := regexp.MustCompile(`(?m)^struct ` + regexp.QuoteMeta(name) + `\s*\{`)
	for _, h := range headers {
		b, err := os.ReadFile(filepath.Join(inc, h))
		if err == nil && def.Match(bytes.ReplaceAll(b, []byte("\t"), []byte(" "))) {
			return h
		}
	}
	return ""
}
