//go:build cluster

// Idle-connection scale of a real `smartgo bridge` process (issue 8): the
// bridge runs on the SmartGo SDK in front of a real registry and broker,
// as deployed, and its RSS is read from /proc. Only with SMARTGO_SCALE=1:
//
//	SMARTGO_SCALE=1 go test -tags cluster ./internal/cluster/ -run TestClusterScaleBridgeIdle -v -timeout 15m
//
// SMARTGO_SCALE_N sets the connection count (default 15000) and
// SMARTGO_SCALE_IDLE how long the bridge then idles before its
// steady-state RSS is read (default 150s). The clients
// are 3 child processes (this test binary re-executed) on 127.0.0.1-8.
// mosquitto, when installed, takes the same storm in the same run.

package cluster

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

func init() {
	if spec := os.Getenv("SMARTGO_CLUSTER_SCALE_CLIENT"); spec != "" {
		os.Exit(scaleClient(spec))
	}
}

// scaleClient opens n MQTT 3.1.1 clean-session connections to addr,
// waits for every CONNACK, prints "ready" and holds them until stdin
// closes. spec is "addr,n,clientIDPrefix".
func scaleClient(spec string) int {
	f := strings.Split(spec, ",")
	if len(f) != 3 {
		fmt.Println("error bad spec", spec)
		return 2
	}
	addr, base := f[0], f[2]
	n, err := strconv.Atoi(f[1])
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	conns := make([]net.Conn, 0, n)
	for i := 0; i < n; i++ {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%8))}, Timeout: 30 * time.Second}
		nc, err := d.Dial("tcp", addr)
		if err != nil {
			fmt.Println("error dial", i, err)
			return 1
		}
		b, err := packets.AppendPacket(nil, &packets.Connect{ClientID: base + strconv.Itoa(i), CleanStart: true, KeepAlive: 900}, packets.Version311)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		if _, err := nc.Write(b); err != nil {
			fmt.Println("error write", i, err)
			return 1
		}
		conns = append(conns, nc)
	}
	buf := make([]byte, 4)
	for i, nc := range conns {
		_ = nc.SetReadDeadline(time.Now().Add(120 * time.Second))
		if _, err := io.ReadFull(nc, buf); err != nil || buf[0] != 0x20 || buf[3] != 0 {
			fmt.Println("error connack", i, buf, err)
			return 1
		}
		_ = nc.SetReadDeadline(time.Time{})
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	runtime.KeepAlive(conns)
	return 0
}

// scaleStorm connects n clients from 3 processes and returns the time
// until all were acknowledged and a function that releases them.
func scaleStorm(t *testing.T, addr string, n int, base string) (time.Duration, func()) {
	t.Helper()
	const procs = 3
	var cmds []*exec.Cmd
	var stdins []interface{ Close() error }
	var readers []*bufio.Reader
	start := time.Now()
	for p := 0; p < procs; p++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("SMARTGO_CLUSTER_SCALE_CLIENT=%s,%d,%s%d-", addr, n/procs, base, p))
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, stdins, readers = append(cmds, cmd), append(stdins, in), append(readers, bufio.NewReader(out))
	}
	release := func() {
		for i, c := range cmds {
			_ = stdins[i].Close()
			_ = c.Wait()
		}
	}
	for _, r := range readers {
		line, _ := r.ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			release()
			t.Fatalf("client process: %q", line)
		}
	}
	return time.Since(start), release
}

func procRSSKiB(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			v, err := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no VmRSS for pid %d", pid)
	return 0
}

// settledRSS waits until the process's RSS stops changing by more than
// 1% over a second (the Go runtime returns freed memory in the
// background) and returns it.
func settledRSS(t *testing.T, pid int) int64 {
	t.Helper()
	prev := procRSSKiB(t, pid)
	for range 30 {
		time.Sleep(time.Second)
		cur := procRSSKiB(t, pid)
		if d := cur - prev; d*100 < prev && -d*100 < prev {
			return cur
		}
		prev = cur
	}
	return prev
}

// scaleIdle is how long the bridge is left idle before its steady-state
// RSS is read (SMARTGO_SCALE_IDLE, a duration; default 150s; 0 skips).
func scaleIdle() time.Duration {
	if v := os.Getenv("SMARTGO_SCALE_IDLE"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return 150 * time.Second
}

func TestClusterScaleBridgeIdle(t *testing.T) {
	if os.Getenv("SMARTGO_SCALE") != "1" {
		t.Skip("set SMARTGO_SCALE=1 to measure a bridge process's idle connections")
	}
	n := 15000
	if v, err := strconv.Atoi(os.Getenv("SMARTGO_SCALE_N")); err == nil && v >= 3 {
		n = v
	}
	n = n / 3 * 3
	dir := t.TempDir()
	ports := freePorts(t, 4)
	reg := "127.0.0.1:" + strconv.Itoa(ports[0])
	start(t, dir, "registry", "registry", "-set", "registry.listen="+reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	start(t, dir, "broker", "broker", "-listen", "127.0.0.1:"+strconv.Itoa(ports[1]), "-data", filepath.Join(dir, "b"),
		"-registries", reg, "-set", "broker.advertise_ip=127.0.0.1", "-set", "store.segment_size=64MiB")
	addr := "127.0.0.1:" + strconv.Itoa(ports[2])
	bridge := start(t, dir, "bridge", "bridge", "-listen", addr, "-registries", reg)
	target := "127.0.0.1:" + strconv.Itoa(ports[2])
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(bridge.log)
			t.Logf("%s:\n%s", bridge.log, tailLines(string(data), 30))
		}
		if os.Getenv("SMARTGO_SCALE_LOG") != "" {
			data, _ := os.ReadFile(bridge.log)
			t.Logf("%s:\n%s", bridge.log, data)
		}
	})
	// A first client proves the bridge is up and connected to the brokers.
	probe, _ := dialMQTT(t, target, "scale-probe", true)
	_ = probe.nc.Close()
	before := settledRSS(t, bridge.cmd.Process.Pid)
	el, release := scaleStorm(t, target, n, "s")
	defer release()
	stormEnd := time.Now()
	after := settledRSS(t, bridge.cmd.Process.Pid)
	per := float64(after-before) / float64(n)
	t.Logf("smartgo bridge process: %d connections in %v (%.0f connects/s); RSS %d -> %d KiB: %.2f KiB per idle connection right after the storm",
		n, el.Round(time.Millisecond), float64(n)/el.Seconds(), before, after, per)
	// Idle for longer than the Go runtime's forced-GC period (2 min): the
	// storm's garbage is collected and the scavenger returns it, which is
	// what an idle fleet costs in steady state.
	if idle := scaleIdle(); idle > 0 {
		time.Sleep(time.Until(stormEnd.Add(idle)))
		idleRSS := settledRSS(t, bridge.cmd.Process.Pid)
		t.Logf("smartgo bridge process after %v idle: RSS %d KiB: %.2f KiB per idle connection",
			idle, idleRSS, float64(idleRSS-before)/float64(n))
	}
	if data, err := os.ReadFile(bridge.log); err == nil && strings.Contains(string(data), "level=ERROR") {
		t.Errorf("bridge logged errors:\n%s", tailLines(string(data), 20))
	}
	release()

	mosq, err := exec.LookPath("mosquitto")
	if err != nil {
		if mosq, err = exec.LookPath("/usr/sbin/mosquitto"); err != nil {
			t.Log("mosquitto not installed: no comparison")
			return
		}
	}
	mport := strconv.Itoa(ports[3])
	conf := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(conf, []byte("listener "+mport+" 127.0.0.1\nallow_anonymous true\nmax_connections -1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(mosq, "-c", conf)
	mlog, err := os.Create(filepath.Join(dir, "mosquitto.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer mlog.Close()
	cmd.Stdout, cmd.Stderr = mlog, mlog
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(mlog.Name())
			t.Logf("mosquitto log:\n%s", data)
		}
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	testutil.Eventually(t, 30*time.Second, func() error {
		c, err := net.Dial("tcp", "127.0.0.1:"+mport)
		if err == nil {
			_ = c.Close()
		}
		return err
	})
	mb := settledRSS(t, cmd.Process.Pid)
	mel, mrelease := scaleStorm(t, "127.0.0.1:"+mport, n, "m")
	defer mrelease()
	ma := settledRSS(t, cmd.Process.Pid)
	t.Logf("mosquitto: %d connections in %v (%.0f connects/s); RSS %d -> %d KiB: %.2f KiB per idle connection",
		n, mel.Round(time.Millisecond), float64(n)/mel.Seconds(), mb, ma, float64(ma-mb)/float64(n))
}
