// Command demo runs SHIFT-Go's demo (see package internal/demo) until `shiftctl demo` takes
// it over.
package main

import (
	"os"

	"github.com/shift-rdma/shift/internal/demo"
)

func main() { os.Exit(demo.Main(os.Args[1:], os.Stdout, os.Stderr)) }
