package twin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/smartgo/smartgo/client/internal/shardroute"
	"github.com/smartgo/smartgo/internal/beat"
	"github.com/smartgo/smartgo/remoting/protocol"
	tw "github.com/smartgo/smartgo/twin"
)

// watches is the client's watch registry: every twin it watches, and what
// it registered with which broker (at which epoch). A broker keeps
// watches per connection, in memory: when the connection closes, the
// broker restarts, or a slave takes over the shard, the client registers
// them again (the watch loop).
//
// A whole set sent again (WatchReplace, resync) is the set of keys when
// resync looked; a Watch or Unwatch made meanwhile may reach the broker
// before it (requests run on a pool there) and be undone by it. So
// watchOne does not write its key into a set that resync replaced while
// its request was out: that set says what the broker was sent; if it
// lacks the key (or holds a removed one) watchOne wakes the loop, which
// sees the difference and sends the set again at once. Resyncs run
// one at a time (syncMu): two replaces with different sets could
// otherwise land at the broker in one order and in regs in the other.
type watches struct {
	syncMu sync.Mutex // held by resync
	mu     sync.Mutex
	keys   map[string]struct{}          // every watched twin key; protected by mu
	regs   map[string]*brokerRegistered // broker address -> what it holds; protected by mu
	lost   atomic.Bool                  // a connection closed since the last check
	wake   chan struct{}
}

type brokerRegistered struct {
	epoch uint64
	keys  map[string]struct{}
}

func (w *watches) init() {
	w.keys = map[string]struct{}{}
	w.regs = map[string]*brokerRegistered{}
	w.wake = make(chan struct{}, 1)
}

func (w *watches) connLost() {
	w.lost.Store(true)
	w.poke()
}

// idle reports that no twin is watched, no broker holds a key of ours,
// and no connection was lost: a check has nothing to do.
func (w *watches) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.keys) > 0 || w.lost.Load() {
		return false
	}
	for _, reg := range w.regs {
		if len(reg.keys) > 0 { // an Unwatch a replace undid
			return false
		}
	}
	return true
}

// poke wakes the watch loop for a check now; a pending wake absorbs it.
func (w *watches) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Watch makes the client receive, through Options.OnDesired, the desired
// changes of a device's (or module's) twin, and a change with Revoked()
// true when the identity is deleted or its device disabled: a front end calls it when a
// device it hosts subscribes to $iothub/twin/PATCH/properties/desired/#
// (or connects), and Unwatch when the device leaves. Changes made while
// the watch is being registered again after a broker restart or a
// takeover are not replayed: devices follow the reconnect flow (GET after
// subscribing, ignore versions already seen).
func (c *Client) Watch(ctx context.Context, deviceID, moduleID string) error {
	return c.watchOne(ctx, TwinKey(deviceID, moduleID), deviceID, tw.WatchAdd)
}

// Unwatch stops the desired changes of a twin.
func (c *Client) Unwatch(ctx context.Context, deviceID, moduleID string) error {
	return c.watchOne(ctx, TwinKey(deviceID, moduleID), deviceID, tw.WatchRemove)
}

// Watched returns how many twins the client watches.
func (c *Client) Watched() int {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return len(c.w.keys)
}

func (c *Client) watchOne(ctx context.Context, key, deviceID string, action tw.WatchAction) error {
	if err := tw.CheckID(deviceID, "deviceId"); err != nil {
		return err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	shards, err := c.route(ctx, false)
	if err != nil {
		return err
	}
	ref := shards[tw.ShardOf(deviceID, len(shards))]
	c.w.mu.Lock()
	if action == tw.WatchAdd {
		c.w.keys[key] = struct{}{}
	} else {
		delete(c.w.keys, key)
	}
	before := c.w.regs[ref.Addr]
	c.w.mu.Unlock()
	epoch, err := c.sendWatch(ctx, ref, action, []string{key})
	if err != nil {
		c.w.connLost() // the loop registers it once the broker answers
		return err
	}
	c.w.mu.Lock()
	reg := c.w.regs[ref.Addr]
	stale := reg == nil || reg.epoch != epoch
	// A set resync sent meanwhile replaced reg: it may have undone this
	// request at the broker, and holds key only if it was sent with it.
	replaced := reg != before
	if reg == nil {
		reg = &brokerRegistered{keys: map[string]struct{}{}}
		c.w.regs[ref.Addr] = reg
	}
	_, held := reg.keys[key]
	// The replaced set was sent without this add (or with this remove):
	// the broker may be left without it. The loop sends the set again at
	// once rather than at the next check; the wake coalesces (one pending,
	// resyncs one at a time), so a connect storm costs at most one whole
	// set in flight, not one per Watch.
	undone := replaced && held != (action == tw.WatchAdd)
	if !replaced {
		if action == tw.WatchAdd {
			reg.keys[key] = struct{}{}
		} else {
			delete(reg.keys, key)
		}
	}
	c.w.mu.Unlock()
	if undone && !stale {
		c.w.poke()
	}
	if stale {
		// A broker we had not seen, or one that restarted: register
		// everything it owns.
		return c.resync(ctx, false)
	}
	return nil
}

// sendWatch sends one watch request to a shard's broker and returns its
// epoch.
func (c *Client) sendWatch(ctx context.Context, ref shardRef, action tw.WatchAction, keys []string) (uint64, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	if ref.Addr == "" {
		return 0, fmt.Errorf("%w: no master for broker %s", ErrUnavailable, ref.Broker)
	}
	if ref.local != nil {
		return ref.local.WatchLocal(action, keys, c), nil
	}
	resp, err := c.rc.Invoke(ctx, ref.Addr, protocol.NewRequest(protocol.TwinWatch, nil, tw.AppendWatch(nil, action, keys)))
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrUnavailable, ref.Addr, err)
	}
	if resp.Code != protocol.Success {
		return 0, fmt.Errorf("%w: %s: code %d: %s", ErrFailed, ref.Addr, resp.Code, resp.Remark)
	}
	epoch, err := tw.DecodeWatchReply(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrFailed, ref.Addr, err)
	}
	return epoch, nil
}

// watchLoop re-registers watches when a connection closed, and every
// WatchCheck asks each broker holding watches whether it restarted.
func (c *Client) watchLoop(ctx context.Context) {
	t := beat.NewTicker(c.opts.WatchCheck) // in the process's shared wake-ups
	defer t.Stop()
	for {
		ping := false // a wake needs no epoch pings: only the sets are checked
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			ping = true
		case <-c.w.wake:
		}
		if c.w.idle() {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
		if err := c.resync(rctx, ping); err != nil && ctx.Err() == nil {
			c.log.Debug("twin: watch check", "err", err)
		}
		cancel()
	}
}

// resync makes every broker hold the watches of the twins it owns: a
// broker whose epoch changed, whose connection closed, or whose set
// differs gets its whole set again (WatchReplace); with ping, the others
// are pinged to learn their epoch.
func (c *Client) resync(ctx context.Context, ping bool) error {
	c.w.syncMu.Lock()
	defer c.w.syncMu.Unlock()
	lost := c.w.lost.Swap(false)
	shards, err := c.route(ctx, lost)
	if err != nil {
		c.w.lost.Store(true)
		return err
	}
	c.w.mu.Lock()
	want := map[string][]string{} // addr -> keys
	refs := map[string]shardRef{}
	for k := range c.w.keys {
		dev := k
		for i := 0; i < len(k); i++ {
			if k[i] == '/' {
				dev = k[:i]
				break
			}
		}
		ref := shards[tw.ShardOf(dev, len(shards))]
		want[ref.Addr] = append(want[ref.Addr], k)
		refs[ref.Addr] = ref
	}
	type job struct {
		ref     shardRef
		keys    []string
		replace bool
		epoch   uint64
	}
	var jobs []job
	for addr, keys := range want {
		reg := c.w.regs[addr]
		same := reg != nil && len(reg.keys) == len(keys)
		if same {
			for _, k := range keys {
				if _, ok := reg.keys[k]; !ok {
					same = false
					break
				}
			}
		}
		j := job{ref: refs[addr], keys: keys, replace: !same || lost}
		if reg != nil {
			j.epoch = reg.epoch
		}
		if j.replace || ping {
			jobs = append(jobs, j)
		}
	}
	for addr, reg := range c.w.regs {
		if _, ok := want[addr]; !ok && len(reg.keys) > 0 {
			// Nothing of ours there any more (the route moved): drop.
			jobs = append(jobs, job{ref: shardRef{Ref: shardroute.Ref{Addr: addr}, local: c.opts.Local[addr]}, replace: true})
		}
	}
	c.w.mu.Unlock()

	var errs []error
	for _, j := range jobs {
		if !j.replace {
			epoch, err := c.sendWatch(ctx, j.ref, tw.WatchPing, nil)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if epoch == j.epoch {
				continue
			}
		}
		slices.Sort(j.keys)
		epoch, err := c.sendWatch(ctx, j.ref, tw.WatchReplace, j.keys)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.w.mu.Lock()
		if len(j.keys) == 0 {
			delete(c.w.regs, j.ref.Addr)
		} else {
			set := map[string]struct{}{}
			for _, k := range j.keys {
				set[k] = struct{}{}
			}
			c.w.regs[j.ref.Addr] = &brokerRegistered{epoch: epoch, keys: set}
		}
		c.w.mu.Unlock()
	}
	if len(errs) > 0 {
		c.w.lost.Store(true) // try again at the next tick
	}
	return errors.Join(errs...)
}
