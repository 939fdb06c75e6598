package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// Replies for a requester connected to another broker of the cluster.
//
// A responder sends its reply to the cluster's reply topic on any broker
// (its producer spreads sends over every broker hosting the topic), but
// only a broker the requester is connected to can push the reply. A
// broker learns the requester's connection from its heartbeat or from its
// request (reply.go); a Go requester (rocketmq-client-go v2.1.2)
// heartbeats only the brokers of the routes it has fetched, and only every
// 30 s, so in a cluster of several masters a reply often lands on a broker
// that has never seen its requester.
//
// Such a broker hands the reply to the other master brokers of its
// cluster (as the registries list them), one at a time, with
// ForwardReplyMessage (remoting/protocol/headers_reply.go), until one
// answers that its requester took the push. The receiving broker pushes
// the reply to its own connection and never forwards it again: a forward
// makes one hop. The whole forward is bounded by the push timeout and the
// reply's TTL (the request's timeout); the reply is stored on the broker
// the responder sent it to, once, whatever the outcome, and the responder
// is answered SUCCESS, or SYSTEM_ERROR (as a Java broker answers when the
// requester's channel is unknown) with every broker's reason.
//
// The forward runs on a goroutine of its own (it may dial a broker), at
// most replyForwardsMax at a time; a reply beyond that is refused at once.

// replyPeersTTL is how long the cluster's master brokers, as a registry
// listed them, are reused before the registries are asked again.
const replyPeersTTL = 5 * time.Second

// replyForwardsMax bounds the forwards in flight.
const replyForwardsMax = 256

// errReplyForwardBusy: replyForwardsMax forwards are in flight, or the
// broker is closing.
var errReplyForwardBusy = errors.New("broker: too many replies being forwarded to other brokers")

// replyForwarder runs the forwards of one broker. Its goroutines are
// tracked by wg and stopped by close.
type replyForwarder struct {
	b      *Broker
	ctx    context.Context
	cancel context.CancelFunc
	sem    chan struct{} // one token per forward in flight
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool // protected by mu

	// peersLock (capacity 1) is held to read or refresh peers; a forward
	// waits for it no longer than its own bound.
	peersLock chan struct{}
	peers     []string  // other masters of the cluster; protected by peersLock
	peersAt   time.Time // when peers was fetched (zero: never); protected by peersLock
}

func newReplyForwarder(b *Broker) *replyForwarder {
	ctx, cancel := context.WithCancel(context.Background())
	return &replyForwarder{b: b, ctx: ctx, cancel: cancel, sem: make(chan struct{}, replyForwardsMax),
		peersLock: make(chan struct{}, 1)}
}

// start runs fn on a goroutine of the forwarder. It reports false, and
// runs nothing, when replyForwardsMax forwards are in flight or the
// forwarder is closed.
func (f *replyForwarder) start(fn func(ctx context.Context)) bool {
	select {
	case f.sem <- struct{}{}:
	default:
		return false
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		<-f.sem
		return false
	}
	f.wg.Add(1)
	f.mu.Unlock()
	go func() {
		defer func() {
			<-f.sem
			f.wg.Done()
		}()
		fn(f.ctx)
	}()
	return true
}

// close cancels the forwards in flight and waits for them. Idempotent.
func (f *replyForwarder) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.cancel()
	f.wg.Wait()
}

// masters returns the remoting addresses of the other master brokers of
// the broker's cluster, sorted by broker name, from the registries (the
// first that answers), reused for replyPeersTTL. When no registry
// answers, the last list known is used.
func (f *replyForwarder) masters(ctx context.Context) ([]string, error) {
	select {
	case f.peersLock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("broker: the other brokers of cluster %s: %w", f.b.opts.ClusterName, ctx.Err())
	}
	defer func() { <-f.peersLock }()
	if !f.peersAt.IsZero() && time.Since(f.peersAt) < replyPeersTTL {
		return f.peers, nil
	}
	b := f.b
	var errs []error
	for _, reg := range b.opts.Registries {
		resp, err := b.client.Invoke(ctx, reg, protocol.NewRequest(protocol.GetBrokerClusterInfo, nil, nil))
		if err != nil {
			errs = append(errs, fmt.Errorf("registry %s: %w", reg, err))
			continue
		}
		var ci protocol.ClusterInfo
		if resp.Code != protocol.Success {
			err = fmt.Errorf("code %d (%s)", resp.Code, resp.Remark)
		} else {
			err = protocol.DecodeJSON(resp.Body, &ci)
		}
		resp.Recycle()
		if err != nil {
			errs = append(errs, fmt.Errorf("registry %s: cluster info: %w", reg, err))
			continue
		}
		f.peers, f.peersAt = clusterMasters(&ci, b.opts.ClusterName, b.opts.BrokerName, b.addr), time.Now()
		return f.peers, nil
	}
	if !f.peersAt.IsZero() {
		b.plog.Warn("registries not answering: replies forwarded to the brokers they listed last", "err", errors.Join(errs...))
		return f.peers, nil
	}
	return nil, fmt.Errorf("broker: the other brokers of cluster %s: %w", b.opts.ClusterName, errors.Join(errs...))
}

// clusterMasters lists the master addresses of cluster's brokers in ci,
// sorted by broker name, leaving out the broker self (by name and by
// address).
func clusterMasters(ci *protocol.ClusterInfo, cluster, selfName, selfAddr string) []string {
	names := slices.Clone(ci.ClusterAddrTable[cluster])
	slices.Sort(names)
	var addrs []string
	for _, name := range slices.Compact(names) {
		bd := ci.BrokerAddrTable[name]
		if name == selfName || bd == nil {
			continue
		}
		if addr := bd.BrokerAddrs[protocol.MasterID]; addr != "" && addr != selfAddr {
			addrs = append(addrs, addr)
		}
	}
	return addrs
}

// replyForwardBound is how long a forward of a reply may take: the push
// timeout, or the reply's TTL (the request's timeout) if shorter. Java's
// client and SmartGo's SDK write the TTL in milliseconds,
// rocketmq-client-go in seconds: a value below 1000 is read as seconds
// (a Java timeout that short would then read longer, and the push
// timeout bounds it).
func replyForwardBound(properties string) time.Duration {
	bound := replyPushTimeout
	if v, ok := record.LookupPropertyString(properties, record.PropertyTTL); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			ttl := time.Duration(n) * time.Millisecond
			if n < 1000 {
				ttl = time.Duration(n) * time.Second
			}
			bound = min(bound, ttl)
		}
	}
	return bound
}

// forwardReply hands the reply ph+body for the requester target, not
// connected here, to the other masters of the cluster in turn until one
// pushed it. It returns nil once pushed, or why not: errReplyNoClient
// when no broker had the requester.
func (b *Broker) forwardReply(ctx context.Context, ph *protocol.ReplyMessageRequestHeader, body []byte, target string) error {
	bound := replyForwardBound(ph.Properties)
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	peers, err := b.fwd.masters(ctx)
	if err != nil {
		return fmt.Errorf("%w: client %s, and %w", errReplyNoClient, target, err)
	}
	var failures []string
	for _, addr := range peers {
		left := time.Until(deadlineOf(ctx))
		if left < time.Millisecond {
			failures = append(failures, "out of time after "+bound.String())
			break
		}
		fh := &protocol.ForwardReplyHeader{ReplyMessageRequestHeader: *ph, PushTimeoutMillis: max(left.Milliseconds(), 1)}
		resp, err := b.client.Invoke(ctx, addr, protocol.NewRequest(protocol.ForwardReplyMessage, fh, body))
		switch {
		case err != nil:
			failures = append(failures, fmt.Sprintf("broker %s: %v", addr, err))
		case resp.Code == protocol.Success:
			resp.Recycle()
			b.plog.Debug("reply forwarded", "replyTo", target, "to", addr)
			return nil
		case resp.Code != protocol.QueryNotFound:
			failures = append(failures, fmt.Sprintf("broker %s: code %d (%s)", addr, resp.Code, resp.Remark))
		}
		if resp != nil {
			resp.Recycle()
		}
	}
	if len(peers) == 0 {
		return fmt.Errorf("%w: client %s (it left, or never sent this broker a heartbeat or request; cluster %s has no other master broker)",
			errReplyNoClient, target, b.opts.ClusterName)
	}
	if len(failures) == 0 {
		return fmt.Errorf("%w: client %s (it left, or never sent a heartbeat or request to this broker or to the %d other master brokers of cluster %s)",
			errReplyNoClient, target, len(peers), b.opts.ClusterName)
	}
	return fmt.Errorf("%w: client %s; forwarding to the %d other master brokers of cluster %s: %s",
		errReplyNoClient, target, len(peers), b.opts.ClusterName, strings.Join(failures, "; "))
}

// deadlineOf returns ctx's deadline (every forward has one).
func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// processForwardReply serves ForwardReplyMessage (SmartGo's 9130): another
// broker of the cluster hands over a reply whose requester it does not
// know. The reply is pushed to the requester if it is connected here, and
// never forwarded again.
func (b *Broker) processForwardReply(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var fh protocol.ForwardReplyHeader
	if err := req.DecodeHeader(&fh); err != nil {
		return errResp(protocol.SystemError, "bad forwarded reply header: %v", err), nil
	}
	target, _ := record.LookupPropertyString(fh.Properties, record.PropertyReplyToClient)
	conn := b.producerConn(target)
	if target == "" || conn == nil {
		return errResp(protocol.QueryNotFound, "push reply message fail, channel of <%s> not found.", target), nil
	}
	push := protocol.NewRequest(protocol.PushReplyMessageToClient, &fh.ReplyMessageRequestHeader, req.Body)
	push.SerializeType = protocol.SerializeJSON
	timeout := min(time.Duration(fh.PushTimeoutMillis)*time.Millisecond, replyPushTimeout)
	err := conn.InvokeNoWait(push, timeout, func(resp *protocol.Command, err error) {
		out := protocol.NewResponse(protocol.Success, "")
		switch {
		case err != nil:
			out = errResp(protocol.SystemError, "push reply message to %s (%s): %v", target, conn.RemoteAddr(), err)
		case resp.Code != protocol.Success:
			out = errResp(protocol.SystemError, "client %s answered the pushed reply with code %d (%s)", target, resp.Code, resp.Remark)
		}
		if resp != nil {
			resp.Recycle()
		}
		_ = c.WriteResponse(req, out)
	})
	if err != nil {
		return errResp(protocol.SystemError, "push reply message to %s (%s): %v", target, conn.RemoteAddr(), err), nil
	}
	return nil, nil // answered by the callback
}
