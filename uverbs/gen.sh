#!/bin/sh
# Regenerates the uverbs ABI from the installed uapi headers (linux-libc-dev, libibverbs-dev):
#   ztypes_linux.go            go tool cgo -godefs types_linux.go (+ the rename below)
#   (then go run ./internal/gendoc documents ztypes_linux.go: cgo -godefs drops comments)
#   internal/cabi/zlayout_cgo.go  go run ./internal/cabi/genlayout (layout oracle table)
# Run through `go generate ./uverbs` or `make generate`.
set -eu
cd "$(dirname "$0")"
obj=$(mktemp -d)
trap 'rm -rf "$obj"' EXIT
{
	go tool cgo -objdir "$obj" -godefs types_linux.go |
		sed -e "s/_Ctype_struct___1/OdpTransportCaps/" -e "2s|-objdir [^ ]* ||" \
		    -e "2a // Regenerate: go generate ./uverbs (runs uverbs/gen.sh: this command, then a rename of\\n// _Ctype_struct___1 to OdpTransportCaps, defined at the end of the file)."
	# cgo -godefs names the anonymous per_transport_caps struct of ib_uverbs_odp_caps
	# _Ctype_struct___1 and leaves it undefined; give it a name (checked by the cabi test).
	printf '\n// OdpTransportCaps mirrors the anonymous per_transport_caps struct of struct ib_uverbs_odp_caps.\ntype OdpTransportCaps struct {\n\tRc_odp_caps uint32\n\tUc_odp_caps uint32\n\tUd_odp_caps uint32\n}\n'
} > ztypes_linux.go.tmp
gofmt ztypes_linux.go.tmp > ztypes_linux.go
rm -f ztypes_linux.go.tmp
# cgo -godefs drops comments: name each struct's C struct and header, restore the const blocks' comments.
go run ./internal/gendoc -types types_linux.go -z ztypes_linux.go
go run ./internal/cabi/genlayout -types types_linux.go -out internal/cabi/zlayout_cgo.go
