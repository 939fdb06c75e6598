package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/smartgo/smartgo/internal/testnet"
)

// The AMQP servers of TestAMQPNextToRabbitMQ, each in its own process.

// amqpServer is a running AMQP server process.
type amqpServer struct {
	name string
	url  string // amqp://guest:guest@127.0.0.1:port/
	pid  int    // the process whose CPU time is measured
	stop func()
}

// rabbitmqServerScript is Debian's start script of rabbitmq-server
// (/usr/sbin/rabbitmq-server would switch to the rabbitmq user and the
// system node's directories).
const rabbitmqServerScript = "/usr/lib/rabbitmq/bin/rabbitmq-server"

// startSmartgoAMQP runs `smartgo standalone`, built from this tree (with
// cmd/smartgo's profile, as every build of the command), on free
// loopback ports with its data in a temp dir, AMQP on one of them.
// COMPARE_AMQP_PPROF=1 also serves /debug/pprof/ on its metrics listener
// and logs that listener's address.
func startSmartgoAMQP(t *testing.T) *amqpServer {
	t.Helper()
	bin := testnet.SmartgoBinary(t, "..")
	dir := t.TempDir()
	ports := testnet.FreePorts(t, 5)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	args := []string{"standalone", "-data", filepath.Join(dir, "data"),
		"-set", "registry.listen=" + addr(0), "-set", "broker.listen=" + addr(1), "-set", "bridge.listen=" + addr(2),
		"-set", "amqp.listen=" + addr(3), "-set", "metrics.listen=" + addr(4), "-set", "console.listen=",
		"-set", "store.segment_size=256MiB", "-set", "log.level=warn"}
	if os.Getenv("COMPARE_AMQP_PPROF") != "" {
		args = append(args, "-set", "metrics.pprof=true")
		t.Logf("smartgo pprof: http://%s/debug/pprof/", addr(4))
	}
	logf, err := os.Create(filepath.Join(dir, "smartgo.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s := &amqpServer{name: "smartgo", url: "amqp://guest:guest@" + addr(3) + "/", pid: cmd.Process.Pid}
	stopped := false
	s.stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("smartgo standalone exited with %v", err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("smartgo standalone did not stop within 30 s of SIGINT")
		}
		if t.Failed() {
			data, _ := os.ReadFile(logf.Name())
			t.Logf("smartgo log:\n%s", data)
		}
		logf.Close()
	}
	t.Cleanup(s.stop)
	if err := waitAMQP(s.url, exited, 60*time.Second); err != nil {
		data, _ := os.ReadFile(logf.Name())
		t.Fatalf("smartgo standalone: %v\n%s", err, data)
	}
	return s
}

// startRabbitMQ runs Debian's rabbitmq-server as a node of its own: its
// own epmd, node name, ports and directories (a temp dir), so that it
// neither meets nor disturbs the system's node. It returns nil, having
// said why, when rabbitmq-server is not installed.
func startRabbitMQ(t *testing.T) *amqpServer {
	t.Helper()
	if _, err := os.Stat(rabbitmqServerScript); err != nil {
		t.Logf("rabbitmq-server is not installed (%v; apt-get install -y rabbitmq-server): RabbitMQ's rows are skipped", err)
		return nil
	}
	dir := t.TempDir()
	ports := testnet.FreePorts(t, 3)
	epmd := exec.Command("epmd", "-port", strconv.Itoa(ports[2]))
	if err := epmd.Start(); err != nil {
		t.Fatalf("epmd: %v", err)
	}
	epmdDone := make(chan struct{})
	go func() { _ = epmd.Wait(); close(epmdDone) }()
	stopEpmd := func() {
		_ = epmd.Process.Kill()
		<-epmdDone
	}
	if err := os.WriteFile(filepath.Join(dir, "enabled_plugins"), []byte("[].\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(rabbitmqServerScript)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"HOME="+dir, // its .erlang.cookie
		fmt.Sprintf("RABBITMQ_NODENAME=compare%d-%d@localhost", os.Getpid(), time.Now().UnixNano()%1e6),
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(ports[0]),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(ports[1]),
		"ERL_EPMD_PORT="+strconv.Itoa(ports[2]),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(dir, "rabbitmq"), // absent: defaults
		"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(dir, "advanced.config"),
	)
	out, err := os.Create(filepath.Join(dir, "rabbitmq.out"))
	if err != nil {
		stopEpmd()
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		stopEpmd()
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s := &amqpServer{name: "rabbitmq", url: fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", ports[0])}
	stopped := false
	s.stop = func() {
		if stopped {
			return
		}
		stopped = true
		// The Erlang VM stops the node on SIGTERM; the script exits with it.
		if s.pid != 0 {
			_ = syscall.Kill(s.pid, syscall.SIGTERM)
		} else {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			if s.pid != 0 {
				_ = syscall.Kill(s.pid, syscall.SIGKILL)
			}
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("rabbitmq-server did not stop within 60 s of SIGTERM")
		}
		stopEpmd()
		if t.Failed() {
			data, _ := os.ReadFile(out.Name())
			t.Logf("rabbitmq-server output:\n%s", data)
		}
		out.Close()
	}
	t.Cleanup(s.stop)
	if err := waitAMQP(s.url, exited, 120*time.Second); err != nil {
		data, _ := os.ReadFile(out.Name())
		t.Fatalf("rabbitmq-server: %v\n%s", err, data)
	}
	pid, err := childNamed(cmd.Process.Pid, "beam.smp")
	if err != nil {
		t.Fatalf("rabbitmq-server: %v", err)
	}
	s.pid = pid
	return s
}

// waitAMQP waits until an AMQP client can open a connection and a
// channel at url, or the process has exited.
func waitAMQP(url string, exited <-chan error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := amqp.Dial(url)
		if err == nil {
			_, cerr := c.Channel()
			c.Close()
			if cerr == nil {
				return nil
			}
			err = cerr
		}
		select {
		case werr := <-exited:
			return fmt.Errorf("exited (%v) before it served AMQP: %w", werr, err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no AMQP within %v: %w", timeout, err)
		}
	}
}

// childNamed finds the descendant of pid whose command is name.
func childNamed(pid int, name string) (int, error) {
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); err == nil && strings.TrimSpace(string(comm)) == name {
			return p, nil
		}
		f, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/children", p, p))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Split(bufio.ScanWords)
		for sc.Scan() {
			if c, err := strconv.Atoi(sc.Text()); err == nil {
				queue = append(queue, c)
			}
		}
		f.Close()
	}
	return 0, errors.New("no " + name + " process under " + strconv.Itoa(pid))
}
