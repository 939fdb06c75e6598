package statestore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/Azure/iot-operations-sdks/go/protocol/hlc"
	azss "github.com/Azure/iot-operations-sdks/go/services/statestore"
	"github.com/anishathalye/porcupine"

	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/statestore"
)

type linIn struct {
	op  string // SET GET DEL VDEL
	key string
	val string
}

type linOut struct {
	val     string
	found   bool
	n       int64
	version statestore.HLC
}

type linState struct {
	exists  bool
	val     string
	version statestore.HLC
}

// linModel is one key of the state store: a register with versions that
// grow with every SET.
var linModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		for _, o := range h {
			k := o.Input.(linIn).key
			by[k] = append(by[k], o)
		}
		var out [][]porcupine.Operation
		for _, p := range by {
			out = append(out, p)
		}
		return out
	},
	Init: func() any { return linState{} },
	Step: func(s, in, out any) (bool, any) {
		st, i, o := s.(linState), in.(linIn), out.(linOut)
		switch i.op {
		case "SET":
			if o.version.Compare(st.version) <= 0 {
				return false, st
			}
			return true, linState{exists: true, val: i.val, version: o.version}
		case "GET":
			if !st.exists {
				return !o.found && o.version.IsZero(), st
			}
			return o.found && o.val == st.val && o.version.Compare(st.version) == 0, st
		case "DEL":
			if !st.exists {
				return o.n == 0, st
			}
			return o.n == 1, linState{version: st.version}
		case "VDEL":
			switch {
			case !st.exists:
				return o.n == 0, st
			case st.val == i.val:
				return o.n == 1, linState{version: st.version}
			default:
				return o.n == -1, st
			}
		}
		return false, st
	},
	Equal: func(a, b any) bool {
		x, y := a.(linState), b.(linState)
		return x.exists == y.exists && x.val == y.val && x.version.Compare(y.version) == 0
	},
	DescribeOperation: func(in, out any) string {
		return fmt.Sprintf("%s %s %s -> %+v", in.(linIn).op, in.(linIn).key, in.(linIn).val, out)
	},
}

// TestStateStoreLinearizability records concurrent SET/GET/DEL/VDEL
// histories of several MQTT clients on a few keys and checks them with
// porcupine.
func TestStateStoreLinearizability(t *testing.T) {
	e := startEnv(t, false)
	const clients, opsEach = 6, 80
	keys := []string{"a", "b", "c"}
	var mu sync.Mutex
	var hist []porcupine.Operation
	var wg sync.WaitGroup
	for ci := 0; ci < clients; ci++ {
		c := e.dial(t, fmt.Sprintf("lin-%d", ci))
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := ctx10(t)
			rng := rand.New(rand.NewPCG(uint64(ci), 7))
			for i := 0; i < opsEach; i++ {
				in := linIn{key: keys[rng.IntN(len(keys))]}
				var out linOut
				var err error
				call := time.Now().UnixNano()
				switch r := rng.IntN(10); {
				case r < 4:
					in.op, in.val = "SET", fmt.Sprintf("v%d-%d", ci, i)
					_, out.version, err = c.Set(ctx, []byte(in.key), []byte(in.val), sscli.SetOptions{})
				case r < 7:
					in.op = "GET"
					var v []byte
					v, out.version, out.found, err = c.Get(ctx, []byte(in.key))
					out.val = string(v)
				case r < 8:
					in.op = "DEL"
					out.n, err = c.Del(ctx, []byte(in.key), statestore.HLC{})
				default:
					// VDEL with a value some SET may have written.
					in.op, in.val = "VDEL", fmt.Sprintf("v%d-%d", rng.IntN(clients), rng.IntN(i+1))
					out.n, err = c.VDel(ctx, []byte(in.key), []byte(in.val), statestore.HLC{})
				}
				ret := time.Now().UnixNano()
				if err != nil {
					t.Errorf("%+v: %v", in, err)
					return
				}
				mu.Lock()
				hist = append(hist, porcupine.Operation{ClientId: ci, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	res := porcupine.CheckOperationsTimeout(linModel, hist, 30*time.Second)
	if res != porcupine.Ok {
		t.Fatalf("history of %d operations is not linearizable: %s", len(hist), res)
	}
	t.Logf("%d operations linearizable", len(hist))
}

// TestStateStoreLinearizabilityModelRejects makes sure the model can fail:
// a GET that returns a value after a later DEL completed is not
// linearizable.
func TestStateStoreLinearizabilityModelRejects(t *testing.T) {
	v1 := statestore.HLC{Wall: 1, Node: "s"}
	bad := []porcupine.Operation{
		{ClientId: 0, Input: linIn{op: "SET", key: "k", val: "x"}, Call: 0, Output: linOut{version: v1}, Return: 1},
		{ClientId: 0, Input: linIn{op: "DEL", key: "k"}, Call: 2, Output: linOut{n: 1}, Return: 3},
		{ClientId: 1, Input: linIn{op: "GET", key: "k"}, Call: 4, Output: linOut{val: "x", found: true, version: v1}, Return: 5},
	}
	if porcupine.CheckOperations(linModel, bad) {
		t.Fatal("stale read accepted as linearizable")
	}
	if !porcupine.CheckOperations(linModel, bad[:2]) {
		t.Fatal("valid prefix rejected")
	}
}

// TestStateStoreLinearizabilityAzureSDK is TestStateStoreLinearizability
// with the Azure IoT Operations Go client (services v0.4.1), which runs
// many calls at once on one connection: several goroutines share each
// client, so requests of one connection are pipelined. It runs over the
// remote and the in-process path to the broker (where mutations of one
// poller round are applied at its end), each with async and sync flush.
func TestStateStoreLinearizabilityAzureSDK(t *testing.T) {
	for _, tc := range []struct {
		name        string
		sync, local bool
	}{{"async-remote", false, false}, {"async-local", false, true}, {"sync-remote", true, false}, {"sync-local", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEnvWith(t, tc.sync, tc.local)
			const conns, perConn, opsEach = 3, 4, 50
			var mu sync.Mutex
			var hist []porcupine.Operation
			var wg sync.WaitGroup
			for ci := range conns {
				c := azureClient(t, e, fmt.Sprintf("alin-%d", ci))
				for gi := range perConn {
					id := ci*perConn + gi
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(id), 9))
						for i := range opsEach {
							op, err := azureLinOp(c, rng, id, i, conns*perConn)
							if err != nil {
								t.Errorf("%+v: %v", op.Input, err)
								return
							}
							mu.Lock()
							hist = append(hist, op)
							mu.Unlock()
						}
					}()
				}
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			if res := porcupine.CheckOperationsTimeout(linModel, hist, 30*time.Second); res != porcupine.Ok {
				t.Fatalf("history of %d operations is not linearizable: %s", len(hist), res)
			}
			t.Logf("%d operations linearizable", len(hist))
		})
	}
}

// azureLinOp runs one random operation of client id (its i-th) on keys a
// and b with the Azure client c and returns it as a porcupine operation.
func azureLinOp(c *azss.Client[string, string], rng *rand.Rand, id, i, clients int) (porcupine.Operation, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	in := linIn{key: []string{"a", "b"}[rng.IntN(2)]}
	var out linOut
	var ver hlc.HybridLogicalClock
	var err error
	call := time.Now().UnixNano()
	switch r := rng.IntN(10); {
	case r < 4:
		in.op, in.val = "SET", fmt.Sprintf("v%d-%d", id, i)
		var res *azss.Response[bool]
		if res, err = c.Set(ctx, in.key, in.val); err == nil {
			ver = res.Version
		}
	case r < 7:
		in.op = "GET"
		var res *azss.Response[string]
		if res, err = c.Get(ctx, in.key); err == nil {
			ver, out.val, out.found = res.Version, res.Value, !res.Version.IsZero()
		}
	case r < 8:
		in.op = "DEL"
		var res *azss.Response[int]
		if res, err = c.Del(ctx, in.key); err == nil {
			out.n = int64(res.Value)
		}
	default:
		// VDEL with a value some SET may have written.
		in.op, in.val = "VDEL", fmt.Sprintf("v%d-%d", rng.IntN(clients), rng.IntN(i+1))
		var res *azss.Response[int]
		if res, err = c.VDel(ctx, in.key, in.val); err == nil {
			out.n = int64(res.Value)
		}
	}
	ret := time.Now().UnixNano()
	if err == nil && !ver.IsZero() && (in.op == "SET" || in.op == "GET") {
		out.version, err = statestore.ParseHLC(ver.String())
	}
	return porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret}, err
}
