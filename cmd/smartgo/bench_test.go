package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
)

func TestCmdBenchE2E(t *testing.T) {
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := strings.Join(c.RegistryAddrs(), ",")
	for _, mode := range []string{"produce", "e2e"} {
		code, stdout, stderr := runCmd(t, "bench", mode, "-registry", reg, "-count", "2000", "-duration", "30s", "-async", "-topic", "BenchT")
		if code != exitOK || !strings.Contains(stdout, "msgs/s") || !strings.Contains(stdout, "p99") {
			t.Fatalf("%s: exit %d\n%s\n%s", mode, code, stdout, stderr)
		}
		if mode == "e2e" && !strings.Contains(stdout, "2000 sent, 2000 received") {
			t.Fatalf("e2e did not receive everything: %s", stdout)
		}
	}
	if code, _, _ := runCmd(t, "bench", "sideways", "-registry", reg); code != exitFailure && code != exitUsage {
		t.Fatalf("bad mode: exit %d", code)
	}
}

// bench consume ends on an idle topic instead of running forever (exit 1
// when nothing arrived, 0 with the summary once a drained topic idles),
// shows live percentiles, and its JSON gives durations in milliseconds.
func TestCmdBinaryBenchConsumeIdle(t *testing.T) {
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := strings.Join(c.RegistryAddrs(), ",")
	if code, _, stderr := runBin(t, 60*time.Second, "admin", "-registry", reg, "topic", "create", "-t", "IdleT", "-r", "2", "-w", "2"); code != exitOK {
		t.Fatalf("create: exit %d: %s", code, stderr)
	}
	start := time.Now()
	code, stdout, stderr := runBin(t, 60*time.Second, "bench", "consume", "-registry", reg, "-topic", "IdleT", "-group", "idle_g", "-idle", "2s")
	if code != exitFailure || !strings.Contains(stderr, "no message arrived within 2s") || time.Since(start) > 40*time.Second {
		t.Fatalf("empty topic: exit %d after %v\nstdout %s\nstderr %s", code, time.Since(start), stdout, stderr)
	}

	code, stdout, stderr = runBin(t, 60*time.Second, "bench", "produce", "-registry", reg, "-topic", "IdleT", "-count", "300", "-o", "json")
	var prod map[string]any
	if err := json.Unmarshal([]byte(stdout), &prod); code != exitOK || err != nil || prod["sent"] != 300.0 {
		t.Fatalf("produce: exit %d %v\n%s\n%s", code, err, stdout, stderr)
	}
	code, stdout, stderr = runBin(t, 60*time.Second, "bench", "consume", "-registry", reg, "-topic", "IdleT", "-group", "idle_g2",
		"-idle", "2s", "-count", "1000000", "-json")
	var rep map[string]any
	if err := json.Unmarshal([]byte(stdout), &rep); code != exitOK || err != nil {
		t.Fatalf("consume: exit %d %v\n%s\n%s", code, err, stdout, stderr)
	}
	if rep["received"] != 300.0 || rep["idleStop"] != true {
		t.Fatalf("consume report: %v", rep)
	}
	// -count stops at that many, though messages arrive in batches of 32
	// (it reported the whole last batch).
	code10, stdout10, stderr10 := runBin(t, 60*time.Second, "bench", "consume", "-registry", reg, "-topic", "IdleT", "-group", "idle_g3",
		"-idle", "2s", "-count", "10", "-json")
	var rep10 map[string]any
	if err := json.Unmarshal([]byte(stdout10), &rep10); code10 != exitOK || err != nil || rep10["received"] != 10.0 {
		t.Fatalf("consume -count 10: exit %d %v %v\n%s\n%s", code10, err, rep10["received"], stdout10, stderr10)
	}
	for _, k := range []string{"elapsedMs", "p50Ms", "p90Ms", "p99Ms", "p999Ms", "maxMs", "sendElapsedMs"} {
		if _, ok := rep[k].(float64); !ok {
			t.Errorf("no number %q in %v", k, rep)
		}
	}
	for _, k := range []string{"elapsed", "p50", "p99", "max"} {
		if _, ok := rep[k]; ok {
			t.Errorf("unitless key %q in %v", k, rep)
		}
	}
	if rep["p50Ms"].(float64) <= 0 || rep["maxMs"].(float64) < rep["p50Ms"].(float64) {
		t.Errorf("latencies: %v", rep)
	}
	if !regexp.MustCompile(`received \d+ .*latency p50 \S+ p99 \S+ max \S+`).MatchString(stderr) {
		t.Errorf("no live percentiles in the progress lines:\n%s", stderr)
	}
}

// TestCmdBinaryBenchSaysWhySendsFail: a run whose sends fail names the
// first failure (it printed only "errors 3", and a user who had not
// started a cluster, or wrote to a read-only topic, could not tell why);
// a topic name the brokers would refuse is refused before anything runs.
func TestCmdBinaryBenchSaysWhySendsFail(t *testing.T) {
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := strings.Join(c.RegistryAddrs(), ",")
	if code, _, stderr := runBin(t, 60*time.Second, "admin", "-registry", reg, "topic", "create", "-t", "ReadOnlyT", "-perm", "4"); code != exitOK {
		t.Fatalf("create: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runBin(t, 60*time.Second, "bench", "produce", "-registry", reg, "-topic", "ReadOnlyT", "-count", "3", "-o", "json")
	var rep map[string]any
	if err := json.Unmarshal([]byte(stdout), &rep); code != exitFailure || err != nil || rep["errors"] != 3.0 || rep["sent"] != 0.0 {
		t.Fatalf("produce to a read-only topic: exit %d %v\n%s\n%s", code, err, stdout, stderr)
	}
	if first, _ := rep["firstError"].(string); !strings.Contains(first, "ReadOnlyT") {
		t.Fatalf("firstError %q does not say what failed", rep["firstError"])
	}
	code, stdout, stderr = runBin(t, 60*time.Second, "bench", "produce", "-registry", reg, "-topic", "bad topic", "-count", "3")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, `-topic: client: invalid options: topic name "bad topic" has " "`) {
		t.Fatalf("bad topic name: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// A sync master with no slave stores every message but answers
// SLAVE_NOT_AVAILABLE: bench produce said "3 sent, 0 errors" and nothing
// else, so a load test of a sync master whose slave was down read as all
// well. It now counts and names such statuses.
func TestCmdBinaryBenchNamesSendStatusNotOK(t *testing.T) {
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: t.TempDir(), SyncMaster: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := strings.Join(c.RegistryAddrs(), ",")
	for _, async := range []bool{false, true} {
		args := []string{"bench", "produce", "-registry", reg, "-topic", "NoSlaveT", "-count", "3", "-o", "json"}
		if async {
			args = append(args, "-async")
		}
		code, stdout, stderr := runBin(t, 60*time.Second, args...)
		var rep map[string]any
		if err := json.Unmarshal([]byte(stdout), &rep); code != exitOK || err != nil || rep["sent"] != 3.0 || rep["errors"] != 0.0 ||
			rep["notOk"] != 3.0 || rep["firstNotOk"] != "SLAVE_NOT_AVAILABLE" {
			t.Fatalf("async %v: exit %d %v\n%s\n%s", async, code, err, stdout, stderr)
		}
	}
	code, stdout, stderr := runBin(t, 60*time.Second, "bench", "produce", "-registry", reg, "-topic", "NoSlaveT", "-count", "2")
	if code != exitOK || !strings.Contains(stdout, "2 sent (2 of them stored with a status other than SEND_OK, the first SLAVE_NOT_AVAILABLE)") {
		t.Fatalf("text summary: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// A message size the client or the broker refuses ends the run at the
// first refusal, with that error and exit 1, instead of sending (and
// allocating) every one of -count refused messages until -duration.
func TestCmdBenchStopsWhenRefused(t *testing.T) {
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := strings.Join(c.RegistryAddrs(), ",")
	// The first send creates the topic: a message it takes.
	if code, stdout, stderr := runCmd(t, "bench", "produce", "-registry", reg, "-count", "1", "-topic", "RefusedT"); code != exitOK {
		t.Fatalf("create: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// (The broker's own limit is not reached from bench: the client
	// compresses its mostly-zero bodies.)
	for _, async := range []bool{false, true} {
		args := []string{"bench", "produce", "-registry", reg, "-topic", "RefusedT", "-size", "5000000", "-count", "1000000", "-duration", "2m"}
		if async {
			args = append(args, "-async", "-concurrency", "2")
		}
		start := time.Now()
		code, stdout, stderr := runCmd(t, args...)
		if code != exitFailure || !strings.Contains(stderr, "stopped at the first message refused") ||
			!strings.Contains(stderr, "body of 5000000 bytes exceeds 4194304") {
			t.Fatalf("async=%v: exit %d after %v\nstdout %s\nstderr %s", async, code, time.Since(start), stdout, stderr)
		}
		if d := time.Since(start); d > time.Minute {
			t.Fatalf("async=%v: stopped after %v, not at the first refusal", async, d)
		}
	}
}
