package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/cluster"
)

// TestCmdAdminMsgBrowse: `msg browse` prints a topic's messages by queue
// offset (mqadmin printMsgByQueue/queryMsgByOffset); there was no way to
// look at what a topic holds without knowing a message's id or key.
func TestCmdAdminMsgBrowse(t *testing.T) {
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := strings.Join(c.RegistryAddrs(), ",")
	browse := func(args ...string) []map[string]any {
		t.Helper()
		code, out, stderr := runCmd(t, append([]string{"admin", "-registry", reg, "-o", "json", "msg", "browse", "-t", "BrowseT"}, args...)...)
		var msgs []map[string]any
		if code != exitOK {
			t.Fatalf("msg browse %v: exit %d: %s", args, code, stderr)
		}
		if err := json.Unmarshal([]byte(out), &msgs); err != nil {
			t.Fatalf("msg browse %v: %v\n%s", args, err, out)
		}
		return msgs
	}
	if code, _, stderr := runCmd(t, "admin", "-registry", reg, "topic", "create", "-t", "BrowseT", "-r", "2", "-w", "2"); code != exitOK {
		t.Fatalf("create: %s", stderr)
	}
	p := testProducer(t, c.RegistryAddrs())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	perQueue := map[float64]int{}
	for i := range 6 {
		res, err := p.Send(ctx, &client.Message{Topic: "BrowseT", Body: []byte(fmt.Sprint("m-", i))})
		if err != nil {
			t.Fatal(err)
		}
		perQueue[float64(res.Queue.QueueID)]++
	}
	all := browse()
	bodies := map[string]bool{}
	for _, m := range all {
		bodies[m["body"].(string)] = true
	}
	if len(all) != 6 || len(bodies) != 6 {
		t.Fatalf("browse: %d messages, bodies %v", len(all), bodies)
	}
	if got := browse("-max", "2"); len(got) != 2 {
		t.Fatalf("-max 2: %d messages", len(got))
	}
	q0 := browse("-q", "0")
	for _, m := range q0 {
		if m["queueId"] != 0.0 {
			t.Fatalf("-q 0 printed a message of queue %v", m["queueId"])
		}
	}
	if len(q0) != perQueue[0] {
		t.Fatalf("-q 0: %d messages, %d sent there", len(q0), perQueue[0])
	}
	if got := browse("-offset", "1000"); len(got) != 0 {
		t.Fatalf("-offset past the end: %v", got)
	}
	if code, _, stderr := runCmd(t, "admin", "-registry", reg, "msg", "browse", "-t", "BrowseT", "-max", "0"); code != exitUsage || !strings.Contains(stderr, "-max must be between 1 and 256") {
		t.Fatalf("-max 0: exit %d: %s", code, stderr)
	}
	// A queue or broker group the topic does not have is an error, not an
	// empty list (it printed nothing and exited 0).
	for _, args := range [][]string{{"-q", "2"}, {"-broker", "no-such-broker"}} {
		code, out, stderr := runCmd(t, append([]string{"admin", "-registry", reg, "msg", "browse", "-t", "BrowseT"}, args...)...)
		if code != exitFailure || !strings.Contains(stderr, "has no queue") {
			t.Fatalf("msg browse %v: exit %d, stdout %q, stderr %q", args, code, out, stderr)
		}
	}
	// The admin call names the queue (the broker answered with a system
	// error, which the console turned into 502).
	adm, err := admin.New(admin.Options{Registries: c.RegistryAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, _, _, _, err := adm.BrowseMessages(ctx, "BrowseT", c.BrokerName(0), 2, 0, 1); !errors.Is(err, client.ErrNoRoute) || !strings.Contains(err.Error(), "no queue 2") {
		t.Fatalf("browse queue 2 of 2: %v", err)
	}
	// -o json gives a body that is not UTF-8 byte for byte, in base64
	// (it printed U+FFFD for each such byte), and a UTF-8 body as text.
	bin := []byte("\xff\xfe\x00bin")
	for _, b := range [][]byte{bin, []byte("héllo")} {
		if _, err := p.Send(ctx, &client.Message{Topic: "BrowseT", Body: b}); err != nil {
			t.Fatal(err)
		}
	}
	var sawBin, sawText bool
	for _, m := range browse() {
		switch {
		case m["bodyBase64"] == base64.StdEncoding.EncodeToString(bin) && m["body"] == nil:
			sawBin = true
		case m["body"] == "héllo" && m["bodyBase64"] == nil:
			sawText = true
		}
	}
	if !sawBin || !sawText {
		t.Fatalf("binary body in base64 %v, UTF-8 body as text %v", sawBin, sawText)
	}
	// The table cuts a long body before a UTF-8 character, not through
	// it (byte 45 is the second of an "é": it showed "a...a\xc3...").
	if _, err := p.Send(ctx, &client.Message{Topic: "BrowseT", Body: []byte(strings.Repeat("a", 44) + "éééé")}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCmd(t, "admin", "-registry", reg, "msg", "browse", "-t", "BrowseT")
	if want := `"` + strings.Repeat("a", 44) + `..."`; code != exitOK || !strings.Contains(out, want) || strings.Contains(out, `\xc3`) {
		t.Fatalf("msg browse: exit %d, want %s in:\n%s%s", code, want, out, stderr)
	}
}
