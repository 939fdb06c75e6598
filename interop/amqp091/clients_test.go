package amqp091

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// clientFlows are the flows testdata/pika_flows.py and
// interop/amqp-node/flows.js both run, with what each must print (as
// decoded JSON; a nil value is checked by check alone).
var clientFlows = []struct {
	flow  string
	want  map[string]any
	check func(t *testing.T, got map[string]any)
}{
	{"basic", map[string]any{
		"bodies":      []any{"msg 0", "msg 1", "msg 2", "msg 3", "msg 4", "msg 5", "msg 6", "msg 7", "msg 8", "msg 9"},
		"redelivered": []any{false, false, false, false, false, false, false, false, false, false},
		"left":        0.0,
	}, nil},
	{"confirms", nil, func(t *testing.T, got map[string]any) {
		if got["acked"] != 100.0 || got["count"] != 100.0 {
			t.Errorf("confirms: %v, want 100 acked and 100 in the queue", got)
		}
		// pika raises UnroutableError; amqplib hands over the return.
		if got["unroutable"] != true && !reflect.DeepEqual(got["returned"], map[string]any{"code": 312.0, "text": "NO_ROUTE", "body": "lost"}) {
			t.Errorf("mandatory publish to nowhere: %v, want it returned with 312 NO_ROUTE", got)
		}
	}},
	{"topic", map[string]any{
		"orange": []any{"quick.orange.rabbit", "lazy.orange.elephant"},
		"lazy":   []any{"lazy.orange.elephant", "lazy.brown.fox", "lazy"},
	}, nil},
	{"rpc", nil, func(t *testing.T, got map[string]any) {
		if got["body"] != "PING" || got["correlation_id"] != "c-42" {
			t.Errorf("rpc reply %v, want PING with correlation id c-42", got)
		}
		if q, _ := got["reply_queue"].(string); !strings.HasPrefix(q, "amq.gen-") {
			t.Errorf("server-named reply queue %q", q)
		}
	}},
	{"channel_error", map[string]any{"code": 404.0, "channel_open": false, "after": "still here"}, nil},
}

// TestPikaClient runs the flows with Debian's python3-pika (skips when
// /usr/bin/python3 cannot import pika: apt-get install python3-pika; CI
// installs it).
func TestPikaClient(t *testing.T) {
	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import pika").CombinedOutput(); err != nil {
		t.Skipf("Debian's python3-pika is not installed (apt-get install python3-pika): %v %s", err, out)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "pika_flows.py"))
	if err != nil {
		t.Fatal(err)
	}
	runClientFlows(t, ".", py, script)
}

// TestAmqplibClient runs the flows with amqplib 2.3.1 from npm (skips
// when node is not installed; fails when npm ci was not run in
// interop/amqp-node).
func TestAmqplibClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir := filepath.Join("..", "amqp-node")
	data, err := os.ReadFile(filepath.Join(dir, "node_modules", "amqplib", "package.json"))
	if err != nil {
		t.Fatal("amqplib is not installed: run npm ci in interop/amqp-node (.ci/run does)")
	}
	var p struct{ Version string }
	if json.Unmarshal(data, &p) != nil || p.Version != "2.3.1" {
		t.Fatalf("amqplib %s installed, want 2.3.1 (npm ci in interop/amqp-node)", p.Version)
	}
	runClientFlows(t, dir, node, "flows.js")
}

// runClientFlows runs each flow as `prog script URL PREFIX FLOW` in dir
// against the shared server and checks the JSON it prints.
func runClientFlows(t *testing.T, dir, prog, script string) {
	s := sharedServer(t)
	for _, f := range clientFlows {
		t.Run(f.flow, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, prog, script, s.url, uniq(t, "c"), f.flow)
			cmd.Dir = dir
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s %s: %v\nstdout: %s\nstderr: %s", filepath.Base(script), f.flow, err, out, stderr.String())
			}
			var got map[string]any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("output %q: %v\nstderr: %s", out, err, stderr.String())
			}
			if f.want != nil && !reflect.DeepEqual(got, f.want) {
				t.Errorf("got  %v\nwant %v", got, f.want)
			}
			if f.check != nil {
				f.check(t, got)
			}
		})
	}
}
