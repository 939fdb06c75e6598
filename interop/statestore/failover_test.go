package statestore

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/smartgo/smartgo/client/admin"
	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/statestore"
)

// A key-value history across failovers: clients keep running SET, GET,
// DEL and VDEL through a bridge process while the master of the broker
// group hosting the state store is killed with SIGKILL, and the
// controller elects another. An operation that failed (the master died
// under it, or a failover was in progress) may or may not have happened:
// a failed read is left out, a failed write stays in the history with an
// unknown result and no return time, so it may take effect at any later
// point or not at all. The history must be linearizable.

// failIn/failOut extend the model of linearizability_test.go with
// operations whose outcome is unknown.
type failState struct {
	exists  bool
	val     string
	version statestore.HLC
	anyVer  bool // written by a write whose reply was lost: any version
}

var failModel = porcupine.Model{
	Partition: linModel.Partition,
	Init:      func() any { return failState{} },
	Step: func(s, in, out any) (bool, any) {
		st, i, o := s.(failState), in.(linIn), out.(linOut)
		unknown := o.n == math.MinInt64
		switch i.op {
		case "SET":
			if unknown {
				return true, failState{exists: true, val: i.val, anyVer: true}
			}
			if !st.anyVer && o.version.Compare(st.version) <= 0 {
				return false, st
			}
			return true, failState{exists: true, val: i.val, version: o.version}
		case "GET":
			if !st.exists {
				return !o.found, st
			}
			if !o.found || o.val != st.val || (!st.anyVer && o.version.Compare(st.version) != 0) {
				return false, st
			}
			return true, failState{exists: true, val: st.val, version: o.version}
		case "DEL":
			if unknown || o.n == 1 {
				return unknown || st.exists, failState{}
			}
			return !st.exists && o.n == 0, st
		case "VDEL":
			match := st.exists && st.val == i.val
			switch {
			case unknown && match:
				return true, failState{}
			case unknown:
				return true, st
			case !st.exists:
				return o.n == 0, st
			case match:
				return o.n == 1, failState{}
			default:
				return o.n == -1, st
			}
		}
		return false, st
	},
	Equal: func(a, b any) bool {
		x, y := a.(failState), b.(failState)
		return x.exists == y.exists && x.val == y.val && x.anyVer == y.anyVer && x.version.Compare(y.version) == 0
	},
	DescribeOperation: linModel.DescribeOperation,
}

// failoverCluster is a registry with a controller inside, three brokers
// in controller mode and one bridge, each its own process.
type failoverCluster struct {
	dir     string
	reg     string
	mqtt    string
	bin     string
	brokers []*exec.Cmd
	bArgs   [][]string
	bAddrs  []string
	logs    []string
	adm     *admin.Admin
}

func (c *failoverCluster) spawn(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	path := filepath.Join(c.dir, name+".log")
	c.logs = append(c.logs, path)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(c.bin, withoutAMQP(args)...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); _ = f.Close() }()
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
	return cmd
}

// startFailoverCluster starts the cluster; bridgeSet are more -set
// flags of the bridge.
func startFailoverCluster(t *testing.T, bridgeSet ...string) *failoverCluster {
	t.Helper()
	c := &failoverCluster{dir: t.TempDir(), bin: smartgoBinary(t)}
	ports := testnet.FreePorts(t, 5)
	c.reg = "127.0.0.1:" + strconv.Itoa(ports[0])
	c.spawn(t, "registry", "registry", "-listen", c.reg, "-set", "registry.kv_config_path="+filepath.Join(c.dir, "kv.json"),
		"-set", "registry.controller=true", "-set", "controller.data_dir="+filepath.Join(c.dir, "controller"),
		"-set", "controller.raft_listen=127.0.0.1:"+strconv.Itoa(ports[0]+1),
		"-set", "controller.heartbeat_interval=250ms", "-set", "controller.heartbeat_timeout=2s")
	for j := range 3 {
		p := ports[1+j]
		c.bAddrs = append(c.bAddrs, "127.0.0.1:"+strconv.Itoa(p))
		args := []string{"broker", "-listen", c.bAddrs[j], "-data", filepath.Join(c.dir, "b"+strconv.Itoa(j)), "-registries", c.reg,
			"-set", "broker.controllers=" + c.reg, "-set", "broker.ha_listen=127.0.0.1:" + strconv.Itoa(p+1),
			"-set", "broker.role=sync_master", "-set", "broker.min_insync_replicas=2", "-set", "broker.sync_lag_max=2s",
			"-set", "broker.advertise_ip=127.0.0.1", "-set", "broker.register_interval=10s", "-set", "broker.ha_reconnect_max=500ms",
			"-set", "store.segment_size=8MiB", "-set", "store.index_slots=20000", "-set", "store.index_entries=80000",
			"-set", "statestore.shards=" + strconv.Itoa(testShards)}
		c.bArgs = append(c.bArgs, args)
		c.brokers = append(c.brokers, c.spawn(t, "broker-"+strconv.Itoa(j), args...))
	}
	c.mqtt = "127.0.0.1:" + strconv.Itoa(ports[4])
	bArgs := []string{"bridge", "-registries", c.reg, "-set", "bridge.listen=" + c.mqtt, "-set", "statestore.shards=" + strconv.Itoa(testShards)}
	for _, kv := range bridgeSet {
		bArgs = append(bArgs, "-set", kv)
	}
	c.spawn(t, "bridge", bArgs...)
	adm, err := admin.New(admin.Options{Registries: []string{c.reg}})
	if err != nil {
		t.Fatal(err)
	}
	c.adm = adm
	t.Cleanup(func() {
		_ = adm.Close()
		if t.Failed() {
			for _, l := range c.logs {
				data, _ := os.ReadFile(l)
				lines := strings.Split(string(data), "\n")
				t.Logf("%s (last lines):\n%s", l, strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
		}
	})
	return c
}

// master waits until the controller names a master whose sync state set
// has every broker, and returns its index.
func (c *failoverCluster) master(t *testing.T) int {
	t.Helper()
	m := -1
	testutil.WaitFor(t, 60*time.Second, "a master with a full sync state set", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		md, err := c.adm.ControllerMetadata(ctx, c.reg)
		if err != nil || len(md.Groups) != 1 || len(md.Groups[0].SyncStateSet) < 3 {
			return false
		}
		for j, a := range c.bAddrs {
			if a == md.Groups[0].MasterAddr {
				m = j
			}
		}
		info, err := c.adm.BrokerRuntimeInfo(ctx, md.Groups[0].MasterAddr)
		return m >= 0 && err == nil && info["masterLease"] == "true"
	})
	return m
}

// TestStateStoreLinearizableAcrossFailovers: see the top of the file.
// Three failovers (SMARTGO_SS_FAILOVERS for more).
func TestStateStoreLinearizableAcrossFailovers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and kills masters")
	}
	failovers := 3
	if v, err := strconv.Atoi(os.Getenv("SMARTGO_SS_FAILOVERS")); err == nil && v > 0 {
		failovers = v
	}
	c := startFailoverCluster(t)
	c.master(t)
	const clients = 4
	var keys []string
	for k := range 12 {
		keys = append(keys, "k"+strconv.Itoa(k))
	}
	var mu sync.Mutex
	var hist []porcupine.Operation
	var ok, failed int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for ci := range clients {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var cl *sscli.Client
		testutil.WaitFor(t, 60*time.Second, "client connected", func() bool {
			var err error
			cl, err = sscli.Dial(dctx, sscli.Options{Addr: c.mqtt, ClientID: fmt.Sprintf("fo-%d", ci)})
			return err == nil
		})
		cancel()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			rng := rand.New(rand.NewPCG(uint64(ci), 11))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				in := linIn{key: keys[rng.IntN(len(keys))]}
				var out linOut
				var err error
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				call := time.Now().UnixNano()
				switch r := rng.IntN(10); {
				case r < 4:
					in.op, in.val = "SET", fmt.Sprintf("v%d-%d", ci, i)
					_, out.version, err = cl.Set(ctx, []byte(in.key), []byte(in.val), sscli.SetOptions{})
				case r < 7:
					in.op = "GET"
					var v []byte
					v, out.version, out.found, err = cl.Get(ctx, []byte(in.key))
					out.val = string(v)
				case r < 8:
					in.op = "DEL"
					out.n, err = cl.Del(ctx, []byte(in.key), statestore.HLC{})
				default:
					in.op, in.val = "VDEL", fmt.Sprintf("v%d-%d", rng.IntN(clients), rng.IntN(i+1))
					out.n, err = cl.VDel(ctx, []byte(in.key), []byte(in.val), statestore.HLC{})
				}
				cancel()
				ret := time.Now().UnixNano()
				mu.Lock()
				switch {
				case err == nil:
					ok++
					hist = append(hist, porcupine.Operation{ClientId: ci, Input: in, Call: call, Output: out, Return: ret})
				case in.op != "GET":
					// Unknown outcome: may take effect any time after the call.
					failed++
					hist = append(hist, porcupine.Operation{ClientId: ci, Input: in, Call: call,
						Output: linOut{n: math.MinInt64}, Return: math.MaxInt64})
				default:
					failed++
				}
				mu.Unlock()
				if err != nil {
					// Back off while the group fails over: each failed
					// write stays in the history as one whose outcome is
					// unknown, and every such write multiplies the orders
					// the checker has to try.
					time.Sleep(700 * time.Millisecond)
				}
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return ok }
	for f := range failovers {
		m := c.master(t)
		before := count()
		testutil.WaitFor(t, 60*time.Second, "operations before the kill", func() bool { return count() > before+100 })
		_ = c.brokers[m].Process.Signal(syscall.SIGKILL)
		killed := time.Now()
		after := count()
		testutil.WaitFor(t, 60*time.Second, "operations after the failover", func() bool { return count() > after+100 })
		t.Logf("failover %d: broker %d killed; operations succeed again %v later", f+1, m, time.Since(killed).Round(time.Millisecond))
		c.brokers[m] = c.spawn(t, "broker-"+strconv.Itoa(m), c.bArgs[m]...)
	}
	c.master(t)
	close(stop)
	wg.Wait()
	res := porcupine.CheckOperationsTimeout(failModel, hist, time.Minute)
	t.Logf("%d operations (%d failed during failovers) over %d failovers: %v", ok+failed, failed, failovers, res)
	if res == porcupine.Illegal {
		t.Fatal("the history is not linearizable")
	}
	if res != porcupine.Ok {
		t.Logf("porcupine gave up within its time limit (%v); no violation found", res)
	}
}

// TestStateStoreFailoverModelRejects: the model with unknown outcomes
// still refuses a history where a value is seen and then lost.
func TestStateStoreFailoverModelRejects(t *testing.T) {
	v1 := statestore.HLC{Wall: 1, Node: "s"}
	unknown := linOut{n: math.MinInt64}
	okHist := []porcupine.Operation{
		{ClientId: 0, Input: linIn{op: "SET", key: "k", val: "x"}, Call: 0, Output: unknown, Return: math.MaxInt64},
		{ClientId: 1, Input: linIn{op: "GET", key: "k"}, Call: 2, Output: linOut{}, Return: 3},
		{ClientId: 1, Input: linIn{op: "GET", key: "k"}, Call: 4, Output: linOut{val: "x", found: true, version: v1}, Return: 5},
	}
	if res := porcupine.CheckOperations(failModel, okHist); !res {
		t.Fatal("a lost-reply write seen late was rejected")
	}
	bad := append(okHist[:0:0], okHist...)
	bad = append(bad, porcupine.Operation{ClientId: 1, Input: linIn{op: "GET", key: "k"}, Call: 6, Output: linOut{}, Return: 7})
	if porcupine.CheckOperations(failModel, bad) {
		t.Fatal("a value seen and then gone was accepted")
	}
}

// TestStateStoreFailoverRightAfterStart kills the first master a moment
// after the first write, before the other brokers have copied its topic
// configuration: the promoted broker knows %SYS_STATESTORE only from the
// replicated log, where only the shards written so far have records. It
// used to import the topic with that many queues, and the state store
// then refused it ("has 3 queues, state store configured for 4 shards")
// and served nothing on the new master, for good. Every shard must serve
// after the failover, and the acknowledged write must be there.
func TestStateStoreFailoverRightAfterStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and kills a master")
	}
	c := startFailoverCluster(t)
	m := c.master(t)
	var cl *sscli.Client
	testutil.WaitFor(t, 60*time.Second, "client connected", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		cl, err = sscli.Dial(ctx, sscli.Options{Addr: c.mqtt, ClientID: "early"})
		return err == nil
	})
	defer cl.Close()
	var v1 statestore.HLC
	testutil.WaitFor(t, 60*time.Second, "the first write", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		applied, v, err := cl.Set(ctx, []byte("first"), []byte("v1"), sscli.SetOptions{})
		v1 = v
		return err == nil && applied
	})
	_ = c.brokers[m].Process.Signal(syscall.SIGKILL)
	// Keys over every shard, written through the new master.
	for k := range 4 * testShards {
		key := []byte("after-" + strconv.Itoa(k))
		testutil.WaitFor(t, 60*time.Second, "a write after the failover", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			applied, _, err := cl.Set(ctx, key, []byte("v"), sscli.SetOptions{})
			return err == nil && applied
		})
	}
	// A read may still be refused while the group settles (its sync state
	// set changing); once answered it must show the first write.
	testutil.WaitFor(t, 60*time.Second, "a read after the failover", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		val, ver, ok, err := cl.Get(ctx, []byte("first"))
		if err == nil && (!ok || string(val) != "v1" || ver.Compare(v1) != 0) {
			t.Fatalf("first write after the failover: %q %v %v, want v1 %v", val, ver, ok, v1)
		}
		return err == nil
	})
}

// withoutAMQP turns AMQP off in a bridge or standalone command line (right
// after the command word, so a test's own amqp.listen comes later and
// wins): the processes of the tests must not all take port 5672.
func withoutAMQP(args []string) []string {
	if len(args) > 0 && (args[0] == "bridge" || args[0] == "standalone") {
		return append([]string{args[0], "-set", "amqp.listen="}, args[1:]...)
	}
	return args
}
