package mqtt

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// The scale measurement runs only with SMARTGO_SCALE=1:
//
//	SMARTGO_SCALE=1 go test ./mqtt -run TestMQTTScaleIdleConnections -v -timeout 10m
//
// It opens SMARTGO_SCALE_N (default 15000) MQTT connections from 3 child
// processes (this test binary re-executed), spread over 127.0.0.1-8, to
// the server and (when installed) to mosquitto, and reports the server's
// RSS per idle connection and the connects per second.

func init() {
	if spec := os.Getenv("SMARTGO_SCALE_CLIENT"); spec != "" {
		scaleClient(spec)
		os.Exit(0)
	}
}

// scaleClient opens n connections to addr, CONNECTs each, prints "ready",
// and holds them until stdin closes.
func scaleClient(spec string) {
	f := strings.Split(spec, ",")
	addr, base := f[0], f[2]
	n, _ := strconv.Atoi(f[1])
	conns := make([]net.Conn, 0, n)
	for i := 0; i < n; i++ {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%8))}}
		nc, err := d.Dial("tcp", addr)
		if err != nil {
			fmt.Println("error", err)
			return
		}
		b, _ := packets.AppendPacket(nil, &packets.Connect{ClientID: base + strconv.Itoa(i), CleanStart: true, KeepAlive: 600}, packets.Version311)
		nc.Write(b)
		conns = append(conns, nc)
	}
	buf := make([]byte, 4)
	for _, nc := range conns {
		nc.SetReadDeadline(time.Now().Add(60 * time.Second))
		if _, err := nc.Read(buf); err != nil || buf[0] != 0x20 {
			fmt.Println("error connack", err)
			return
		}
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	runtime.KeepAlive(conns) // unreferenced conns would be closed by their finalizers
}

func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			v, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return v
		}
	}
	return 0
}

// storm connects n clients from 3 processes and returns the elapsed time
// and a function that releases them.
func storm(t *testing.T, addr string, n int, base string) (time.Duration, func()) {
	const procs = 3
	var cmds []*exec.Cmd
	var stdins []interface{ Close() error }
	start := time.Now()
	var readers []*bufio.Reader
	for p := 0; p < procs; p++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("SMARTGO_SCALE_CLIENT=%s,%d,%s%d-", addr, n/procs, base, p))
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, stdins = append(cmds, cmd), append(stdins, in)
		readers = append(readers, bufio.NewReader(out))
	}
	for _, r := range readers {
		line, _ := r.ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			t.Fatalf("client: %q", line)
		}
	}
	el := time.Since(start)
	return el, func() {
		for i, c := range cmds {
			stdins[i].Close()
			c.Wait()
		}
	}
}

func TestMQTTScaleIdleConnections(t *testing.T) {
	if os.Getenv("SMARTGO_SCALE") != "1" {
		t.Skip("set SMARTGO_SCALE=1 to measure idle connection memory and connect rate")
	}
	n := 15000
	if v, err := strconv.Atoi(os.Getenv("SMARTGO_SCALE_N")); err == nil {
		n = v
	}
	ts := startServer(t, func(o *Options) { o.Listen = []string{"0.0.0.0:0"} })
	_, port, _ := net.SplitHostPort(ts.addr)
	addr := "127.0.0.1:" + port
	runtime.GC()
	debug.FreeOSMemory()
	before := rssKiB(os.Getpid())
	el, release := storm(t, addr, n, "s")
	testutil.WaitFor(t, 30*time.Second, "connections", func() bool { return ts.Stats().Connections.Load() >= int64(n/3*3) })
	runtime.GC()
	debug.FreeOSMemory()
	after := rssKiB(os.Getpid())
	got := ts.Stats().Connections.Load()
	t.Logf("smartgo: %d connections in %v (%.0f connects/s), RSS %d -> %d KiB, %.2f KiB per idle connection, goroutines %d",
		got, el, float64(got)/el.Seconds(), before, after, float64(after-before)/float64(got), runtime.NumGoroutine())
	release()

	mosq, err := exec.LookPath("mosquitto")
	if err != nil {
		t.Log("mosquitto not installed: no comparison")
		return
	}
	dir := t.TempDir()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	_, mport, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	conf := dir + "/m.conf"
	os.WriteFile(conf, []byte("listener "+mport+" 127.0.0.1\nallow_anonymous true\nmax_connections -1\n"), 0o644)
	cmd := exec.Command(mosq, "-c", conf)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	testutil.WaitFor(t, 5*time.Second, "mosquitto listening", func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+mport)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	mb := rssKiB(cmd.Process.Pid)
	mel, mrelease := storm(t, "127.0.0.1:"+mport, n, "m")
	ma := rssKiB(cmd.Process.Pid)
	t.Logf("mosquitto: %d connections in %v (%.0f connects/s), RSS %d -> %d KiB, %.2f KiB per idle connection",
		n/3*3, mel, float64(n/3*3)/mel.Seconds(), mb, ma, float64(ma-mb)/float64(n/3*3))
	mrelease()
}
