package uverbs

//go:generate sh gen.sh
