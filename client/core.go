package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/internal/beat"
	"github.com/smartgo/smartgo/internal/pace"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// core is what a producer or consumer shares with its background tasks:
// the connections, the route cache and the broker address table. Each
// Producer and consumer owns one core (no state is global).
type core struct {
	opts     ClientOptions
	log      *slog.Logger
	rc       *remoting.Client
	clientID string

	regNext atomic.Uint32 // registry to try first
	// newBrokers is set when a route brings a broker address not seen
	// before (consumers then heartbeat at once).
	newBrokers atomic.Bool
	// routeWake has the route refresh task run now; wokeAt spaces the
	// wake-ups refreshSoon sends.
	routeWake chan struct{}
	wokeAt    pace.Gate
	// extraRCs are more clients whose connections follow the route like
	// rc's (a consumer's extra pull connections); set before first use.
	extraRCs []*remoting.Client

	mu      sync.RWMutex
	routes  map[string]*topicRoute      // protected by mu; by topic
	brokers map[string]map[int64]string // protected by mu; broker name -> id -> addr

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
}

// topicRoute is a route as fetched, with the queues derived from it.
type topicRoute struct {
	data    *protocol.TopicRouteData
	publish []MessageQueue // writable queues on brokers with a master
	read    []MessageQueue // readable queues
	fetched time.Time
	// autoCreate: built from TBW102, sends carry defaultTopic for the
	// broker to create the topic.
	autoCreate bool
}

func newCore(opts ClientOptions) (*core, error) {
	rc, err := remoting.NewClient(remoting.ClientOptions{
		ConnOptions: remoting.ConnOptions{RequestTimeout: opts.RequestTimeout},
		Logger:      opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &core{opts: opts, log: opts.Logger, rc: rc, routes: map[string]*topicRoute{},
		brokers: map[string]map[int64]string{}, routeWake: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
	ip := opts.ClientIP
	if ip == "" {
		ip = localIP()
	}
	inst := opts.InstanceName
	if inst == "" || inst == "DEFAULT" {
		inst = strconv.Itoa(os.Getpid()) + "#" + strconv.FormatInt(time.Now().UnixNano(), 10)
	}
	c.clientID = ip + "@" + inst
	liveCores.Store(c, struct{}{})
	return c, nil
}

// liveCores are the process's open cores (*core): one that learns that a
// broker's master moved has the others look at their routes too.
var liveCores sync.Map

// goFunc runs fn as a goroutine owned by the core.
func (c *core) goFunc(fn func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
}

// every runs fn every d until the core closes; wake (may be nil) runs it
// at once.
func (c *core) every(d time.Duration, wake <-chan struct{}, fn func()) {
	c.goFunc(func() {
		t := beat.NewTicker(d) // in the process's shared wake-ups (internal/beat)
		defer t.Stop()
		for {
			select {
			case <-c.ctx.Done():
				return
			case <-t.C:
			case <-wake:
			}
			fn()
		}
	})
}

// close stops the background goroutines and the connections.
func (c *core) close() error {
	liveCores.Delete(c)
	c.cancel()
	c.wg.Wait()
	return c.rc.Close()
}

// callCtx derives a context bounded by the request timeout when ctx has no
// deadline.
func (c *core) callCtx(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		d = c.opts.RequestTimeout
	}
	return context.WithTimeout(ctx, d)
}

// invoke sends a request and returns the response, errors classified.
func (c *core) invoke(ctx context.Context, op, addr string, req *protocol.Command) (*protocol.Command, error) {
	resp, err := c.rc.Invoke(ctx, addr, req)
	if err != nil {
		return nil, c.callErr(op, addr, err)
	}
	return resp, nil
}

// callErr is wrapCallErr for a request to addr; a request that got no
// answer in time has the routes refreshed soon (refreshSoon).
func (c *core) callErr(op, addr string, err error) error {
	err = wrapCallErr(op, addr, err)
	if errors.Is(err, ErrTimeout) && !slices.Contains(c.opts.Registries, addr) {
		c.refreshSoon()
	}
	return err
}

// refreshSoon has the route refresh task run now (at most once every
// pace.RouteAfterTimeout for this reason): a master that hangs or is cut off
// closes no connection, and the requests after the one that timed out
// should go to the master elected in its place (storeRoute closes the
// connection to the old one), not wait for the periodic refresh.
func (c *core) refreshSoon() {
	if !c.wokeAt.Allow(pace.RouteAfterTimeout) {
		return
	}
	select {
	case c.routeWake <- struct{}{}:
	default:
	}
}

// invokeOK is invoke that turns a non-success code into a *BrokerError.
func (c *core) invokeOK(ctx context.Context, op, addr string, req *protocol.Command) (*protocol.Command, error) {
	resp, err := c.invoke(ctx, op, addr, req)
	if err != nil {
		return nil, err
	}
	if resp.Code != protocol.Success {
		return nil, newBrokerError(op, addr, resp)
	}
	return resp, nil
}

// invokeRegistry sends req to the registries in turn, starting with the
// last one that answered, until one answers.
func (c *core) invokeRegistry(ctx context.Context, op string, newReq func() *protocol.Command) (*protocol.Command, string, error) {
	regs := c.opts.Registries
	start := int(c.regNext.Load())
	var errs []error
	for i := range regs {
		idx := (start + i) % len(regs)
		addr := regs[idx]
		cctx, cancel := c.callCtx(ctx, 0)
		resp, err := c.invoke(cctx, op, addr, newReq())
		cancel()
		if err == nil {
			c.regNext.Store(uint32(idx))
			return resp, addr, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil || errors.Is(err, ErrClosed) {
			break
		}
	}
	if ctx.Err() != nil {
		return nil, "", fmt.Errorf("%w: %s: %w", ErrTimeout, op, errors.Join(errs...))
	}
	return nil, "", fmt.Errorf("%w: %s: %w", ErrRegistryUnavailable, op, errors.Join(errs...))
}

// fetchRoute asks the registries for a topic's route.
func (c *core) fetchRoute(ctx context.Context, topic string) (*protocol.TopicRouteData, error) {
	resp, addr, err := c.invokeRegistry(ctx, "route", func() *protocol.Command {
		return protocol.NewRequest(protocol.GetRouteInfoByTopic,
			&protocol.GetRouteInfoRequestHeader{Topic: topic, AcceptStandardJSONOnly: true}, nil)
	})
	if err != nil {
		return nil, err
	}
	switch resp.Code {
	case protocol.Success:
	case protocol.TopicNotExist:
		return nil, fmt.Errorf("%w: %s (registry %s: %s)", ErrTopicNotExist, topic, addr, resp.Remark)
	default:
		return nil, newBrokerError("route", addr, resp)
	}
	var rd protocol.TopicRouteData
	if err := protocol.DecodeJSON(resp.Body, &rd); err != nil {
		return nil, fmt.Errorf("client: route of %s from %s: %w", topic, addr, err)
	}
	return &rd, nil
}

// buildRoute derives the publish and read queues of a route.
func buildRoute(topic string, rd *protocol.TopicRouteData, maxQueues int32) *topicRoute {
	tr := &topicRoute{data: rd, fetched: time.Now()}
	masters := masterNames(rd)
	qds := append([]*protocol.QueueData(nil), rd.QueueDatas...)
	sort.Slice(qds, func(i, j int) bool { return qds[i].BrokerName < qds[j].BrokerName })
	for _, qd := range qds {
		if qd == nil {
			continue
		}
		w, r := qd.WriteQueueNums, qd.ReadQueueNums
		if maxQueues > 0 {
			w, r = min(w, maxQueues), min(r, maxQueues)
		}
		if qd.Perm&protocol.PermWrite != 0 && masters[qd.BrokerName] {
			for q := int32(0); q < w; q++ {
				tr.publish = append(tr.publish, MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueID: q})
			}
		}
		if qd.Perm&protocol.PermRead != 0 {
			for q := int32(0); q < r; q++ {
				tr.read = append(tr.read, MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueID: q})
			}
		}
	}
	return tr
}

// masterNames is the set of rd's broker names that have a master address.
func masterNames(rd *protocol.TopicRouteData) map[string]bool {
	masters := map[string]bool{}
	for _, bd := range rd.BrokerDatas {
		if bd != nil && bd.MasterAddr() != "" {
			masters[bd.BrokerName] = true
		}
	}
	return masters
}

// storeRoute caches a route and merges its broker addresses. A broker
// whose master moved has the connection to its old master closed:
// requests still waiting on it (a master that hangs answers none) fail
// now, and a send tries again on the new master while it has time.
func (c *core) storeRoute(topic string, tr *topicRoute) {
	var stale []string
	c.mu.Lock()
	c.routes[topic] = tr
	for _, bd := range tr.data.BrokerDatas {
		if bd == nil {
			continue
		}
		addrs := make(map[int64]string, len(bd.BrokerAddrs))
		old := c.brokers[bd.BrokerName]
		for id, a := range bd.BrokerAddrs {
			addrs[id] = a
			if old[id] != a {
				c.newBrokers.Store(true)
			}
		}
		if was := old[protocol.MasterID]; was != "" && was != addrs[protocol.MasterID] && addrs[protocol.MasterID] != "" {
			stale = append(stale, was)
		}
		c.brokers[bd.BrokerName] = addrs
	}
	c.mu.Unlock()
	if len(stale) == 0 {
		return
	}
	for _, a := range stale {
		c.log.Info("broker master moved; closing the connection to the old one", "addr", a)
		c.rc.CloseConn(a)
		for _, rc := range c.extraRCs {
			rc.CloseConn(a)
		}
	}
	// The process's other producers and consumers may be waiting on the
	// old master too (a consumer's held pull is not answered for a while
	// even by a live broker, so it cannot tell a hung one soon).
	liveCores.Range(func(k, _ any) bool {
		if o := k.(*core); o != c {
			o.refreshSoon()
		}
		return true
	})
}

// route returns the cached route of topic, fetching it when absent.
func (c *core) route(ctx context.Context, topic string) (*topicRoute, error) {
	c.mu.RLock()
	tr := c.routes[topic]
	c.mu.RUnlock()
	if tr != nil {
		return tr, nil
	}
	return c.updateRoute(ctx, topic)
}

// updateRoute fetches and caches the route of topic.
func (c *core) updateRoute(ctx context.Context, topic string) (*topicRoute, error) {
	rd, err := c.fetchRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	tr := buildRoute(topic, rd, 0)
	c.storeRoute(topic, tr)
	return tr, nil
}

// refreshRoutes re-fetches every cached route (the 30 s task). A route that
// fails to refresh is kept; auto-create routes are replaced once the real
// route exists.
func (c *core) refreshRoutes() {
	c.mu.RLock()
	topics := make([]string, 0, len(c.routes))
	for t := range c.routes {
		topics = append(topics, t)
	}
	c.mu.RUnlock()
	for _, t := range topics {
		if _, err := c.updateRoute(c.ctx, t); err != nil && c.ctx.Err() == nil {
			c.log.Debug("route refresh failed", "topic", t, "err", err)
		}
	}
}

// brokerAddr returns the address of a broker name's broker id, falling back
// to the master, then to any address.
func (c *core) brokerAddr(name string, id int64) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	addrs := c.brokers[name]
	if a, ok := addrs[id]; ok {
		return a
	}
	if a, ok := addrs[protocol.MasterID]; ok {
		return a
	}
	ids := make([]int64, 0, len(addrs))
	for i := range addrs {
		ids = append(ids, i)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if len(ids) > 0 {
		return addrs[ids[0]]
	}
	return ""
}

// brokerNameOf returns the name of the broker at addr, or "" when no
// route names it.
func (c *core) brokerNameOf(addr string) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for name, addrs := range c.brokers {
		for _, a := range addrs {
			if a == addr {
				return name
			}
		}
	}
	return ""
}

// masterAddr returns the master address of a broker name, or "".
func (c *core) masterAddr(name string) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.brokers[name][protocol.MasterID]
}

// allBrokerAddrs returns every known broker address (masters only when
// mastersOnly), sorted.
func (c *core) allBrokerAddrs(mastersOnly bool) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []string
	for _, addrs := range c.brokers {
		for id, a := range addrs {
			if !mastersOnly || id == protocol.MasterID {
				out = append(out, a)
			}
		}
	}
	sort.Strings(out)
	return out
}

// sendHeartbeat sends hb to every known broker (masters only when
// mastersOnly); it returns every broker's error (errors.Join, in address
// order) and how many brokers it sent to.
func (c *core) sendHeartbeat(ctx context.Context, hb *protocol.HeartbeatData, mastersOnly bool) (int, error) {
	body, err := protocol.EncodeJSON(hb)
	if err != nil {
		return 0, fmt.Errorf("client: encode heartbeat: %w", err)
	}
	var errs []error
	addrs := c.allBrokerAddrs(mastersOnly)
	for _, addr := range addrs {
		cctx, cancel := c.callCtx(ctx, 0)
		_, err := c.invokeOK(cctx, "heartbeat", addr, protocol.NewRequest(protocol.HeartBeat, nil, body))
		cancel()
		if err != nil {
			c.log.Debug("heartbeat failed", "broker", addr, "err", err)
			errs = append(errs, err)
		}
	}
	return len(addrs), errors.Join(errs...)
}

// unregister tells every broker the client is gone.
func (c *core) unregister(ctx context.Context, producerGroup, consumerGroup string) {
	for _, addr := range c.allBrokerAddrs(false) {
		cctx, cancel := c.callCtx(ctx, time.Second)
		_, _ = c.invoke(cctx, "unregister", addr, protocol.NewRequest(protocol.UnregisterClient,
			&protocol.UnregisterClientRequestHeader{ClientID: c.clientID, ProducerGroup: producerGroup, ConsumerGroup: consumerGroup}, nil))
		cancel()
	}
}

// localIP returns the first non-loopback IPv4 address, else 127.0.0.1.
func localIP() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() {
				if v4 := ipn.IP.To4(); v4 != nil {
					return v4.String()
				}
			}
		}
	}
	return "127.0.0.1"
}
