// Package amqpwire checks SmartGo's AMQP 0-9-1 codec (amqp/wire) against
// the codecs inside real clients: every method with each bit field alone,
// and the basic properties, go through amqplib's and pika's own decoder
// and encoder and must come back equal. The connection tests in
// interop/amqp091 cover what the clients send in practice; this covers
// every method and bit, including those rarely sent.
package amqpwire

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
)

// allMethods is one empty value of each of the 64 methods.
func allMethods() []wire.Method {
	return []wire.Method{
		&wire.ConnectionStart{}, &wire.ConnectionStartOk{}, &wire.ConnectionSecure{}, &wire.ConnectionSecureOk{},
		&wire.ConnectionTune{}, &wire.ConnectionTuneOk{}, &wire.ConnectionOpen{}, &wire.ConnectionOpenOk{},
		&wire.ConnectionClose{}, &wire.ConnectionCloseOk{}, &wire.ConnectionBlocked{}, &wire.ConnectionUnblocked{},
		&wire.ConnectionUpdateSecret{}, &wire.ConnectionUpdateSecretOk{},
		&wire.ChannelOpen{}, &wire.ChannelOpenOk{}, &wire.ChannelFlow{}, &wire.ChannelFlowOk{}, &wire.ChannelClose{}, &wire.ChannelCloseOk{},
		&wire.ExchangeDeclare{}, &wire.ExchangeDeclareOk{}, &wire.ExchangeDelete{}, &wire.ExchangeDeleteOk{},
		&wire.ExchangeBind{}, &wire.ExchangeBindOk{}, &wire.ExchangeUnbind{}, &wire.ExchangeUnbindOk{},
		&wire.QueueDeclare{}, &wire.QueueDeclareOk{}, &wire.QueueBind{}, &wire.QueueBindOk{}, &wire.QueuePurge{}, &wire.QueuePurgeOk{},
		&wire.QueueDelete{}, &wire.QueueDeleteOk{}, &wire.QueueUnbind{}, &wire.QueueUnbindOk{},
		&wire.BasicQos{}, &wire.BasicQosOk{}, &wire.BasicConsume{}, &wire.BasicConsumeOk{}, &wire.BasicCancel{}, &wire.BasicCancelOk{},
		&wire.BasicPublish{}, &wire.BasicReturn{}, &wire.BasicDeliver{}, &wire.BasicGet{}, &wire.BasicGetOk{}, &wire.BasicGetEmpty{},
		&wire.BasicAck{}, &wire.BasicReject{}, &wire.BasicRecoverAsync{}, &wire.BasicRecover{}, &wire.BasicRecoverOk{}, &wire.BasicNack{},
		&wire.ConfirmSelect{}, &wire.ConfirmSelectOk{},
		&wire.TxSelect{}, &wire.TxSelectOk{}, &wire.TxCommit{}, &wire.TxCommitOk{}, &wire.TxRollback{}, &wire.TxRollbackOk{},
	}
}

// args is a table of the value types both clients carry through a
// decode and an encode (their integers come back in the width they pick,
// so integers compare as int64). Not what pika 1.2.0 reads differently
// from RabbitMQ: floats (it truncates them to integers), a negative int8
// 'b' or int64 'l' (it reads them unsigned).
func args() wire.Table {
	return wire.Table{"s": "str", "b": true, "n": int32(300), "big": int64(1) << 40, "neg": int16(-300),
		"x": []byte{0, 1}, "a": []any{"one", int32(2)}, "t": wire.Table{"k": "v"}, "v": nil}
}

// variants fills every field of proto's type: all bits clear, all set,
// then each bit alone.
func variants(proto wire.Method) []wire.Method {
	fill := func(bits bool) (wire.Method, reflect.Value) {
		m := reflect.New(reflect.TypeOf(proto).Elem()).Interface().(wire.Method)
		v := reflect.ValueOf(m).Elem()
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if !v.Type().Field(i).IsExported() {
				continue
			}
			switch f.Kind() {
			case reflect.String:
				f.SetString("v-" + v.Type().Field(i).Name)
			case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				f.SetUint(uint64(i+1) * 0x0101)
			case reflect.Bool:
				f.SetBool(bits)
			case reflect.Map:
				f.Set(reflect.ValueOf(args()))
			}
		}
		return m, v
	}
	none, v := fill(false)
	all, _ := fill(true)
	out := []wire.Method{none, all}
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).Kind() == reflect.Bool {
			m, mv := fill(false)
			mv.Field(i).SetBool(true)
			out = append(out, m)
		}
	}
	return out
}

// normalize makes the integers of m's tables int64.
func normalize(v any) any {
	switch v := v.(type) {
	case wire.Table:
		o := wire.Table{}
		for k, e := range v {
			o[k] = normalize(e)
		}
		return o
	case []any:
		o := make([]any, len(v))
		for i, e := range v {
			o[i] = normalize(e)
		}
		return o
	}
	if n, ok := wire.AsInt64(v); ok {
		return n
	}
	return v
}

func normalizeMethod(m wire.Method) {
	v := reflect.ValueOf(m).Elem()
	for i := 0; i < v.NumField(); i++ {
		if !v.Type().Field(i).IsExported() {
			continue
		}
		if t, ok := v.Field(i).Interface().(wire.Table); ok {
			v.Field(i).Set(reflect.ValueOf(normalize(t)))
		}
	}
}

// properties are content properties to send through the clients.
func properties() []wire.Properties {
	return []wire.Properties{
		{ContentType: "text/plain", ContentEncoding: "gzip", Headers: args(), DeliveryMode: 2, Priority: 5,
			CorrelationID: "c", ReplyTo: "r", Expiration: "100", MessageID: "m",
			Timestamp: time.Unix(1700000000, 0).UTC(), Type: "t", UserID: "u", AppID: "a"},
		{DeliveryMode: 1},
		{MessageID: "only"},
		{Headers: wire.Table{"k": "v"}, Type: "x"},
	}
}

// throughClient sends every method variant and the properties through
// the client's codec (prog script in dir) and checks what comes back.
func throughClient(t *testing.T, dir, prog, script string) {
	var in strings.Builder
	var sent []wire.Method
	for _, proto := range allMethods() {
		for _, m := range variants(proto) {
			fmt.Fprintf(&in, "%d %x\n", uint32(m.ClassID())<<16|uint32(m.MethodID()), m.AppendArgs(nil))
			sent = append(sent, m)
		}
	}
	props := properties()
	for _, p := range props {
		raw, err := wire.AppendProperties(nil, p)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&in, "P %x\n", raw)
	}
	cmd := exec.Command(prog, script)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(in.String())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\nstderr: %s", filepath.Base(script), err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(sent)+len(props) {
		t.Fatalf("%d lines back for %d methods and %d properties", len(lines), len(sent), len(props))
	}
	skipped := map[string]bool{}
	for i, m := range sent {
		name := wire.Name(m)
		if lines[i] == "skip" {
			skipped[name] = true
			continue
		}
		b, err := hex.DecodeString(lines[i])
		if err != nil {
			t.Fatalf("%s: line %q: %v", name, lines[i], err)
		}
		payload := append([]byte{byte(m.ClassID() >> 8), byte(m.ClassID()), byte(m.MethodID() >> 8), byte(m.MethodID())}, b...)
		got, err := wire.DecodeMethod(payload)
		if err != nil {
			t.Errorf("%s as the client wrote it: %v\n% x", name, err, b)
			continue
		}
		normalizeMethod(got)
		normalizeMethod(m)
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%s through the client:\n got %#v\nwant %#v", name, got, m)
		}
	}
	for i, p := range props {
		b, err := hex.DecodeString(lines[len(sent)+i])
		if err != nil {
			t.Fatal(err)
		}
		got, err := wire.DecodeProperties(b)
		if err != nil {
			t.Errorf("properties %d as the client wrote them: %v\n% x", i, err, b)
			continue
		}
		want := p
		want.Flags = wire.FlagContentType // any non-zero: compared below
		if got.Flags == 0 {
			t.Errorf("properties %d: no flags back", i)
		}
		got.Flags = want.Flags
		got.Headers, _ = normalize(got.Headers).(wire.Table)
		want.Headers, _ = normalize(want.Headers).(wire.Table)
		if len(p.Headers) == 0 {
			got.Headers, want.Headers = nil, nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("properties %d through the client:\n got %#v\nwant %#v", i, got, want)
		}
	}
	if len(skipped) > 0 {
		t.Logf("methods the client does not know: %v", skipped)
	}
}

// TestCodecThroughAmqplib: amqplib 2.3.1 (npm ci in interop/amqp-node;
// skips when node or interop/amqp-node is missing, fails when npm ci was
// not run).
func TestCodecThroughAmqplib(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir := filepath.Join("..", "amqp-node")
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		t.Skip("interop/amqp-node (the amqplib interop package) is not in this tree")
	}
	data, err := os.ReadFile(filepath.Join(dir, "node_modules", "amqplib", "package.json"))
	if err != nil {
		t.Fatal("amqplib is not installed: run npm ci in interop/amqp-node (.ci/run does)")
	}
	var p struct{ Version string }
	if json.Unmarshal(data, &p) != nil || p.Version != "2.3.1" {
		t.Fatalf("amqplib %s installed, want 2.3.1 (npm ci in interop/amqp-node)", p.Version)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "amqplib_codec.js"))
	if err != nil {
		t.Fatal(err)
	}
	throughClient(t, dir, node, script)
}

// TestCodecThroughPika: Debian's python3-pika (skips when /usr/bin/python3
// cannot import pika; CI installs it). pika 1.2.0 does not know
// connection.update-secret; those lines come back as skipped.
func TestCodecThroughPika(t *testing.T) {
	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import pika").CombinedOutput(); err != nil {
		t.Skipf("Debian's python3-pika is not installed (apt-get install python3-pika): %v %s", err, out)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "pika_codec.py"))
	if err != nil {
		t.Fatal(err)
	}
	throughClient(t, ".", py, script)
}
