// Command headergen writes remoting/protocol/headers_gen.go from the
// header table (go generate ./remoting/protocol runs it).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/smartgo/smartgo/remoting/protocol/internal/headergen"
)

func main() {
	out := flag.String("o", "headers_gen.go", "output `file`")
	flag.Parse()
	src, err := headergen.Generate(headergen.Headers)
	if err == nil {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
