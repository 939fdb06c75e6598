package protocol

import (
	"bytes"
	"os"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol/internal/headergen"
)

// TestHeadersGenerated fails when headers_gen.go is not what the header
// table generates: edit internal/headergen/table.go and run
// `go generate ./remoting/protocol`, never the generated file.
func TestHeadersGenerated(t *testing.T) {
	want, err := headergen.Generate(headergen.Headers)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("headers_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("headers_gen.go is stale: run go generate ./remoting/protocol")
	}
}
