//go:build cluster

// A fleet of MQTT devices at scale against real processes: one registry,
// one broker, and as many `smartgo bridge` processes as the fleet needs
// (a process may hold only so many open files), each with its own
// `smartgo bench devices` process connecting from its own 127.0.x.y
// addresses. Only with SMARTGO_SCALE_DEVICES=<devices> (make scale-devices):
//
//	SMARTGO_SCALE_DEVICES=1000000 go test -tags cluster ./internal/cluster/ -run TestClusterScaleDevices -v -timeout 60m
//
// SMARTGO_SCALE_PER sets the devices per bridge (default 18000: a bridge
// keeps room under a 20,000-file limit), SMARTGO_SCALE_HOLD how long the
// connected fleet idles while the bridges' CPU is counted (default 60s),
// SMARTGO_SCALE_KEEPALIVE the devices' keep alive (default 60s),
// SMARTGO_SCALE_RATE the fleet's connects per second in all (default
// 2500) and SMARTGO_SCALE_INFLIGHT its connects waiting for a CONNACK at
// once in all (default 2048): a storm past what the machine's two cores
// serve ends in connect timeouts (docs/fleet.md), SMARTGO_SCALE_PUBLISH a telemetry interval per device (QoS 1;
// default none).

package cluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// fleetProc is one `smartgo bench devices` process.
type fleetProc struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer // the JSON report, read after Wait
	errLog string       // its progress lines
	n      int
	done   chan struct{}
}

var fleetProgress = regexp.MustCompile(`connected (\d+) connecting (\d+) failed (\d+) dropped (\d+)`)

// progress returns the fleet's last progress counts (connected,
// connecting, failed, dropped), ok = false before its first line.
func (f *fleetProc) progress(t *testing.T) (c [4]int, ok bool) {
	t.Helper()
	data, err := os.ReadFile(f.errLog)
	if err != nil {
		t.Fatal(err)
	}
	m := fleetProgress.FindAllStringSubmatch(string(data), -1)
	if len(m) == 0 {
		return c, false
	}
	for i := range c {
		c[i], _ = strconv.Atoi(m[len(m)-1][i+1])
	}
	return c, true
}

func scaleEnv(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d >= 0 {
		return d
	}
	return def
}

// meminfoKiB reads one /proc/meminfo field.
func meminfoKiB(t *testing.T, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			v, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return v
		}
	}
	t.Fatalf("no %s in /proc/meminfo", field)
	return 0
}

func TestClusterScaleDevices(t *testing.T) {
	total, _ := strconv.Atoi(os.Getenv("SMARTGO_SCALE_DEVICES"))
	if total <= 0 {
		t.Skip("set SMARTGO_SCALE_DEVICES=<devices> to measure a fleet of MQTT devices")
	}
	per := 18000
	if v, err := strconv.Atoi(os.Getenv("SMARTGO_SCALE_PER")); err == nil && v > 0 {
		per = v
	}
	hold := scaleEnv("SMARTGO_SCALE_HOLD", 60*time.Second)
	keepAlive := scaleEnv("SMARTGO_SCALE_KEEPALIVE", 60*time.Second)
	publish := scaleEnv("SMARTGO_SCALE_PUBLISH", 0)
	rate, inflight := 2500, 2048
	if v, err := strconv.Atoi(os.Getenv("SMARTGO_SCALE_RATE")); err == nil && v > 0 {
		rate = v
	}
	if v, err := strconv.Atoi(os.Getenv("SMARTGO_SCALE_INFLIGHT")); err == nil && v > 0 {
		inflight = v
	}
	k := (total + per - 1) / per
	if k > 250 {
		t.Fatalf("%d bridges: at most 250 (one 127.0.x.0/24 of source addresses each)", k)
	}
	dir := t.TempDir()
	ports := freePorts(t, 2+k)
	reg := "127.0.0.1:" + strconv.Itoa(ports[0])
	start(t, dir, "registry", "registry", "-set", "registry.listen="+reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	broker := start(t, dir, "broker", "broker", "-listen", "127.0.0.1:"+strconv.Itoa(ports[1]), "-data", filepath.Join(dir, "b"),
		"-registries", reg, "-set", "broker.advertise_ip=127.0.0.1", "-set", "store.segment_size=256MiB")
	bridges := make([]*proc, k)
	addrs := make([]string, k)
	for i := range bridges {
		addrs[i] = "127.0.0.1:" + strconv.Itoa(ports[2+i])
		bridges[i] = start(t, dir, fmt.Sprintf("bridge%d", i), "bridge", "-listen", addrs[i], "-registries", reg)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, b := range bridges {
				data, _ := os.ReadFile(b.log)
				t.Logf("%s:\n%s", b.log, tailLines(string(data), 10))
			}
		}
	})
	for i, a := range addrs {
		probe, _ := dialMQTT(t, a, fmt.Sprintf("scale-probe-%d", i), true)
		_ = probe.nc.Close()
	}
	var rssBefore int64
	for _, b := range bridges {
		rssBefore += settledRSS(t, b.cmd.Process.Pid)
	}
	availBefore := meminfoKiB(t, "MemAvailable")

	fleets := make([]*fleetProc, k)
	startAt := time.Now()
	for i := range fleets {
		n := min(per, total-i*per)
		args := []string{"bench", "devices", "-mqtt", addrs[i], "-n", strconv.Itoa(n), "-first", strconv.Itoa(i * per),
			"-sources", fmt.Sprintf("127.0.%d.1-127.0.%d.8", i+1, i+1), "-keepalive", keepAlive.String(),
			"-rate", strconv.Itoa(max(1, rate/k)), "-inflight", strconv.Itoa(max(1, inflight/k)), "-timeout", "60s", "-o", "json"}
		if publish > 0 {
			args = append(args, "-publish-every", publish.String())
		}
		f := &fleetProc{n: n, errLog: filepath.Join(dir, fmt.Sprintf("fleet%d.log", i)), done: make(chan struct{})}
		ef, err := os.Create(f.errLog)
		if err != nil {
			t.Fatal(err)
		}
		f.cmd = exec.Command(smartgoBin(t), args...)
		f.cmd.Stdout, f.cmd.Stderr = &f.stdout, ef
		if err := f.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = f.cmd.Wait(); _ = ef.Close(); close(f.done) }()
		t.Cleanup(func() { _ = f.cmd.Process.Kill(); <-f.done })
		fleets[i] = f
	}
	// Connected: every fleet has each device connected or failed.
	testutil.Eventually(t, 30*time.Minute, func() error {
		for i, f := range fleets {
			select {
			case <-f.done:
				t.Fatalf("fleet %d exited:\n%s", i, f.stdout.String())
			default:
			}
			c, ok := f.progress(t)
			if !ok || c[1] != 0 || c[0]+c[2]+c[3] < f.n {
				return fmt.Errorf("fleet %d: %v of %d", i, c, f.n)
			}
		}
		return nil
	})
	connectTook := time.Since(startAt)
	var up int
	for _, f := range fleets {
		c, _ := f.progress(t)
		up += c[0]
	}
	t.Logf("%d of %d devices connected to %d bridge processes in %v (%.0f connects/s)", up, total, k,
		connectTook.Round(time.Second), float64(up)/connectTook.Seconds())

	// Idle: the bridges' and the broker's CPU over the hold.
	cpu0 := make([]testutil.CPUSample, k+1)
	pids := []int{broker.cmd.Process.Pid}
	for _, b := range bridges {
		pids = append(pids, b.cmd.Process.Pid)
	}
	for i, pid := range pids {
		var err error
		if cpu0[i], err = testutil.ProcessCPU(pid); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(hold) // the measured span: the fleet idles (or publishes) on its own
	var bridgeCPU, brokerCPU time.Duration
	for i, pid := range pids {
		s, err := testutil.ProcessCPU(pid)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			brokerCPU = s.Since(cpu0[i])
		} else {
			bridgeCPU += s.Since(cpu0[i])
		}
	}
	var rssAfter int64
	for _, b := range bridges {
		rssAfter += procRSSKiB(t, b.cmd.Process.Pid)
	}
	availAfter := meminfoKiB(t, "MemAvailable")
	t.Logf("held %v: bridges' CPU %v (%.1f %% of a core; %.2f µs a second per device), broker's %v",
		hold, bridgeCPU.Round(time.Millisecond), 100*bridgeCPU.Seconds()/hold.Seconds(),
		float64(bridgeCPU.Microseconds())/hold.Seconds()/float64(max(up, 1)), brokerCPU.Round(time.Millisecond))
	t.Logf("bridges' RSS %d -> %d MiB: %.2f KiB per device; the machine's available memory %d -> %d MiB (%.2f KiB per device, both ends and the kernel's sockets)",
		rssBefore>>10, rssAfter>>10, float64(rssAfter-rssBefore)/float64(max(up, 1)),
		availBefore>>10, availAfter>>10, float64(availBefore-availAfter)/float64(max(up, 1)))

	var sum struct{ Connected, Failed, Dropped, Pings, Pongs, Published, Acked int64 }
	errs := map[string]int64{}
	for _, f := range fleets {
		_ = f.cmd.Process.Signal(syscall.SIGINT) // all at once: each then disconnects its devices
	}
	for i, f := range fleets {
		select {
		case <-f.done:
		case <-time.After(2 * time.Minute):
			t.Fatalf("fleet %d did not stop", i)
		}
		var r struct {
			Connected, Failed, Dropped, Pings, Pongs, Published, Acked int64
			Errors                                                     map[string]int64
			ConnectP50Ms, ConnectP99Ms, PublishP99Ms                   float64
		}
		if err := json.Unmarshal(f.stdout.Bytes(), &r); err != nil {
			t.Fatalf("fleet %d report: %v\n%s", i, err, f.stdout.String())
		}
		t.Logf("fleet %d: connected %d, CONNACK p50 %.1f ms p99 %.1f ms, publish p99 %.1f ms", i, r.Connected, r.ConnectP50Ms, r.ConnectP99Ms, r.PublishP99Ms)
		sum.Connected += r.Connected
		sum.Failed += r.Failed
		sum.Dropped += r.Dropped
		sum.Pings += r.Pings
		sum.Pongs += r.Pongs
		sum.Published += r.Published
		sum.Acked += r.Acked
		for e, n := range r.Errors {
			errs[e] += n
		}
	}
	t.Logf("fleet: %+v errors %v", sum, errs)
	if sum.Failed != 0 || sum.Dropped != 0 || sum.Connected != int64(total) || sum.Pongs < sum.Pings-sum.Connected {
		t.Errorf("the fleet did not hold: %+v %v", sum, errs)
	}
}
