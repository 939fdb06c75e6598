package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/smartgo/smartgo/client/statestore/router"
	"github.com/smartgo/smartgo/internal/gogroup"
	"github.com/smartgo/smartgo/internal/ratelog"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
	"github.com/smartgo/smartgo/statestore"
)

// The protocol's status codes and property names used by the front
// (docs/protocols.md, "State store over MQTT 5").
const (
	ssStatusBadRequest  = "400"
	ssStatusBadContent  = "415"
	ssStatusInternal    = "500"
	ssStatusUnavailable = "503"
	ssPropName          = "__propName"
	ssPropVal           = "__propVal"
)

// DefaultDropTimeout bounds telling the brokers a client left.
const DefaultDropTimeout = 2 * time.Second

// StateStoreFrontOptions configures a StateStoreFront.
type StateStoreFrontOptions struct {
	// Router reaches the brokers hosting the shards (its OnNotify is set
	// by the front).
	Router router.Options
	// Hook, when the server was built on it, tells the front when clients
	// disconnect so their KEYNOTIFY registrations are dropped. Without it
	// registrations are dropped only when a notification finds no session.
	Hook *StateStoreSessionHook
	// DropTimeout bounds telling the brokers a client left (default 2 s).
	DropTimeout time.Duration
	Logger      *slog.Logger
}

// StateStoreFront serves the state store's MQTT 5 RPC on an mqtt.Server:
// it claims statestore.RequestTopic with Server.Handle, checks each
// request's envelope, forwards it to the broker owning the key's shard and
// puts the response (to the request's response topic, with its correlation
// data) and the KEYNOTIFY notifications straight into the clients'
// sessions with Server.SendTo, without subscription matching, so each
// session gets one copy whether or not it subscribed.
type StateStoreFront struct {
	srv        *mqtt.Server
	router     *router.Router
	opts       StateStoreFrontOptions
	log        *slog.Logger
	unregister func()

	mu       sync.Mutex
	watchers map[string]bool        // clients that sent KEYNOTIFY since they connected; protected by mu
	watches  map[string]*ssWatchSet // client id -> the registrations shards accepted (statestore_watch.go); protected by mu
	resyncs  map[string]int         // broker -> changes noticed while its watches are registered again; protected by mu
	stop     chan struct{}          // closed by Close

	closeOnce sync.Once
	group     gogroup.Group // goroutines Close waits for
}

// NewStateStoreFront registers the front on srv (call before or after
// srv.Start).
func NewStateStoreFront(srv *mqtt.Server, opts StateStoreFrontOptions) (*StateStoreFront, error) {
	if srv == nil {
		return nil, fmt.Errorf("%w: nil mqtt server", ErrInvalidOptions)
	}
	if opts.DropTimeout == 0 {
		opts.DropTimeout = DefaultDropTimeout
	}
	lg := ratelog.Wrap(opts.Logger, 0) // requests come from MQTT clients
	f := &StateStoreFront{srv: srv, opts: opts, log: lg.With("component", "statestore-front"), watchers: map[string]bool{},
		watches: map[string]*ssWatchSet{}, resyncs: map[string]int{}, stop: make(chan struct{})}
	ro := opts.Router
	ro.OnNotify = f.pushNotifications
	ro.OnMasterChange = f.masterChanged
	if ro.Logger == nil {
		ro.Logger = f.log
	}
	r, err := router.New(ro)
	if err != nil {
		return nil, fmt.Errorf("bridge: state store: %w", err)
	}
	f.router = r
	if opts.Hook != nil {
		opts.Hook.set(f.clientGone)
	}
	f.unregister = srv.HandleInline(statestore.RequestTopic, f.handle)
	return f, nil
}

// Close unregisters the handler and closes the broker connections. It is
// idempotent.
func (f *StateStoreFront) Close() error {
	var err error
	f.closeOnce.Do(func() {
		f.group.Close()
		close(f.stop)
		f.unregister()
		if f.opts.Hook != nil {
			f.opts.Hook.set(nil)
		}
		err = f.router.Close()
		f.group.Wait()
	})
	return err
}

// handle serves one request PUBLISH (an inline mqtt.AsyncHandler: it may
// run on the connection's poller, so it never waits). It checks the
// envelope and hands the request to the router. A request a broker in
// this process answers without waiting (a GET; a SET under async flush)
// is answered at once, on the caller's goroutine, and so is every error
// of the envelope. The rest is answered later (later): a remote shard's
// answer comes on its connection's reader; a local request that waits
// for a flush or a slave, a KEYNOTIFY PREFIX and a disconnect run on a
// goroutine of the front's.
func (f *StateStoreFront) handle(ctx context.Context, from mqtt.ClientInfo, msg *mqtt.Message, later func() func(error)) error {
	if msg.ResponseTopic == "" {
		f.log.Debug("state store request without response topic dropped", "client", from.ClientID)
		return nil
	}
	if statestore.ForbiddenResponseTopic(msg.ResponseTopic) {
		// The protocol disconnects such clients (v5: DISCONNECT 0x87);
		// the PUBACK is not sent on the closed connection. Closing may
		// wait (the session hook tells the brokers), so not here.
		f.log.Warn("state store request with forbidden response topic: disconnecting", "client", from.ClientID, "topic", msg.ResponseTopic)
		done := later()
		if !f.group.Go(func() {
			if err := f.srv.Disconnect(from.ClientID, packets.ReasonNotAuthorized); err != nil {
				f.log.Debug("state store: disconnect", "client", from.ClientID, "err", err)
			}
			done(mqtt.ErrNotAuthorized)
		}) {
			done(mqtt.ErrNotAuthorized)
		}
		return nil
	}
	var protVer string
	var hasProtVer bool
	// The call goes back to ssCalls once answered on this goroutine; one
	// answered later is left to the collector.
	call := ssCalls.Get().(*ssCall)
	call.req, call.cmd, call.resp = router.BrokerRequest{ClientID: from.ClientID, Payload: msg.Payload}, statestore.Command{}, router.BrokerResponse{}
	req := &call.req
	for _, up := range msg.User {
		switch up.Key {
		case statestore.PropProtocolVersion:
			protVer, hasProtVer = up.Value, true
		case statestore.PropTimestamp:
			req.Timestamp, req.HasTimestamp = up.Value, true
		case statestore.PropFencingToken:
			req.FencingToken, req.HasFencingToken = up.Value, true
		}
	}
	if !statestore.ProtocolVersionSupported(protVer, hasProtVer) {
		props := statestore.UnsupportedVersionProperties(protVer)
		f.respond(from.ClientID, msg, nil, props)
		ssCalls.Put(call)
		return nil
	}
	if !f.envelopeOK(from.ClientID, msg) {
		ssCalls.Put(call)
		return nil
	}
	req.ProtVer, req.HasProtVer = protVer, hasProtVer
	dedup := true

	// The payload is parsed here, once: the key picks the shard, and the
	// command goes along to a broker in this process, whose engine uses
	// it as it is. A malformed request goes to the shard of the empty key,
	// whose engine answers the RESP-level error.
	var cmd *statestore.Command
	prefix := false
	if c, err := statestore.ParseCommand(msg.Payload); err == nil {
		call.cmd = c
		cmd = &call.cmd
		// Only mutations' replies are cached: a redelivered GET is simply
		// served again, so it needs no cache key (nor a cache lookup).
		dedup = cmd.Verb != statestore.VerbGet
		if cmd.Verb == statestore.VerbKeyNotify {
			prefix = cmd.Prefix
			if !cmd.Stop {
				f.mu.Lock()
				f.watchers[from.ClientID] = true
				f.mu.Unlock()
			}
		}
	}
	round := mqtt.RoundOf(ctx)
	// The round's clock reading, which the message's expiry came from
	// (time.Now without a round): the router judges the route's age and
	// the request's deadline by it, and the dedup TTL is counted from it,
	// so a request served now reads the clock nowhere on its way.
	now := round.Now()
	if dedup {
		req.DedupKey = statestore.AppendDedupKey(call.dedup[:0], msg.CorrelationData, msg.ResponseTopic)
		req.DedupTTLMillis = max(msg.Expiry.Sub(now).Milliseconds(), 0)
	}
	if !prefix {
		if round != nil {
			if cmd != nil && ssMutation(cmd.Verb) {
				if f.deferToRound(ctx, round, now, from.ClientID, msg, call) {
					return nil
				}
			} else {
				// A request served now sees the round's mutations
				// (a GET after a pipelined SET of the same client).
				round.Flush()
			}
		}
		if ok, err := f.router.InvokeCommandNow(ctx, now, msg.Expiry, cmd, req, &call.resp); ok {
			if cmd != nil && cmd.Verb == statestore.VerbKeyNotify {
				f.noteWatch(from.ClientID, cmd, &call.resp, err)
			}
			f.answer(round, from.ClientID, msg, &call.resp, err)
			// Nothing keeps the request: the engine copied what it
			// keeps (the log entry, the dedup key, the client id's
			// string).
			ssCalls.Put(call)
			return nil
		}
	}
	done := later()
	// The request's bytes are the call's only (HandleInline): what is
	// answered later gets copies.
	msg = ssDetach(call, msg, cmd != nil)
	finish := func(resp *router.BrokerResponse, err error) {
		if cmd != nil && cmd.Verb == statestore.VerbKeyNotify && !prefix {
			f.noteWatch(from.ClientID, cmd, resp, err)
		}
		f.answer(nil, from.ClientID, msg, resp, err)
		done(nil)
	}
	// Nothing that may wait runs on the caller's goroutine: a remote
	// call may dial, a local one wait for a flush, and a KEYNOTIFY
	// PREFIX waits for every shard.
	if !f.group.Go(func() {
		if prefix {
			ictx, cancel := context.WithDeadline(ctx, msg.Expiry)
			defer cancel()
			finish(f.invokeAll(ictx, from.ClientID, cmd, req))
			return
		}
		f.router.InvokeCommandAsync(ctx, msg.Expiry, cmd, req, finish)
	}) {
		finish(nil, router.ErrClosed)
	}
	return nil
}

// ssDetach copies what a request answered later uses of msg, whose bytes
// are the handler call's only: the response's envelope (response topic,
// correlation data, expiry) and the payload, on which call's command is
// parsed again when parsed says it was; the call's strings are copied too.
func ssDetach(call *ssCall, msg *mqtt.Message, parsed bool) *mqtt.Message {
	m := &mqtt.Message{Topic: strings.Clone(msg.Topic), Payload: bytes.Clone(msg.Payload), QoS: msg.QoS,
		ContentType: strings.Clone(msg.ContentType), ResponseTopic: strings.Clone(msg.ResponseTopic),
		CorrelationData: bytes.Clone(msg.CorrelationData), Expiry: msg.Expiry, ClientID: msg.ClientID, Username: msg.Username}
	req := &call.req
	req.Payload = m.Payload
	req.Timestamp, req.FencingToken, req.ProtVer = strings.Clone(req.Timestamp), strings.Clone(req.FencingToken), strings.Clone(req.ProtVer)
	if parsed {
		// It parsed before; the same bytes parse the same.
		call.cmd, _ = statestore.ParseCommand(m.Payload)
	}
	return m
}

// envelopeOK checks a request's MQTT envelope and answers a bad one with
// its 400 or 415 response.
func (f *StateStoreFront) envelopeOK(clientID string, msg *mqtt.Message) bool {
	switch {
	case len(msg.CorrelationData) == 0:
		f.respondError(clientID, msg, ssStatusBadRequest, "correlation data missing", "Correlation Data", "")
	case len(msg.CorrelationData) != 16:
		f.respondError(clientID, msg, ssStatusBadRequest, "correlation data is not a UUID", "Correlation Data", "")
	case msg.QoS != 1:
		f.respondError(clientID, msg, ssStatusBadRequest, "requests must be sent at QoS 1", "QoS", fmt.Sprint(msg.QoS))
	case msg.Expiry.IsZero():
		f.respondError(clientID, msg, ssStatusBadRequest, "message expiry missing", "Message Expiry", "")
	case msg.ContentType != "" && !ssOctetStream(msg.ContentType):
		f.respondError(clientID, msg, ssStatusBadContent, "content type mismatch", "Content Type", msg.ContentType)
	case msg.HasPayloadFormat && msg.PayloadFormat != 0:
		f.respondError(clientID, msg, ssStatusBadContent, "payload format indicator mismatch", "Payload Format Indicator", "1")
	default:
		return true
	}
	return false
}

// answer sends the response to a request the router served (or failed
// to). The notifications a change caused, for watchers on this front as
// on others, the broker pushed before it answered (OnNotify: a local
// broker on this goroutine, a remote one on its connection ahead of the
// response, in the shard's log order with its other changes' and
// expiries'), so they are in the watchers' sessions before the requester
// learns its write is done; a KEYNOTIFY ... SINCE's backlog likewise.
// What the response carries (only a broker of an earlier version's: the
// notices for this front, a SINCE backlog) goes first. round is the poller round the answer is sent on
// (mqtt.Round.SendToRecycled), nil off a poller.
func (f *StateStoreFront) answer(round *mqtt.Round, clientID string, msg *mqtt.Message, resp *router.BrokerResponse, err error) {
	if err != nil {
		f.log.Warn("state store request failed", "client", clientID, "err", err)
		if errors.Is(err, router.ErrDiskFull) {
			f.respond(clientID, msg, ssDiskFullReply, ssDiskFullProps)
			return
		}
		if errors.Is(err, router.ErrFailed) {
			f.respondError(clientID, msg, ssStatusInternal, "the state store shard failed", "", "")
		} else {
			f.respondError(clientID, msg, ssStatusUnavailable, "the state store shard is unavailable", "", "")
		}
		return
	}
	f.pushNotifications(resp.Notifications)
	f.respondOK(round, clientID, msg, resp.Reply, resp.Version)
}

// The answer to a write the shard's full disk refused (statestore's
// PropRefusal): the protocol's quota error, and properties saying why.
var (
	ssDiskFullReply = []byte("-ERR " + statestore.ErrQuota.Text() + "\r\n")
	ssDiskFullProps = []statestore.UserProperty{
		{Key: statestore.PropStatus, Value: statestore.Status200},
		{Key: statestore.PropProtocolVersion, Value: statestore.ProtocolVersion},
		{Key: statestore.PropStatusMessage, Value: statestore.DiskFullMessage},
		{Key: statestore.PropRefusal, Value: statestore.RefusalDiskFull},
	}
)

// ssCall is what the front builds for one request, in one object:
// the broker request, the parsed command it points to, the response of a
// broker in this process, and room for the dedup key of a response topic
// of up to 160 bytes. Its size stays at 512 bytes
// (TestStateStoreFrontCallSize), the largest object the Go allocator
// serves without a type header.
type ssCall struct {
	req   router.BrokerRequest
	cmd   statestore.Command
	resp  router.BrokerResponse
	dedup [184]byte
}

// ssCalls recycles the calls answered on the handler's goroutine: a
// call is 512 bytes to clear and scan per request otherwise.
var ssCalls = sync.Pool{New: func() any { return new(ssCall) }}

// ssResponse is a 200 response, its user properties and, in envelope,
// the copies of the request's response topic and correlation data it
// carries (the request's bytes are the handler call's only), in one
// object: the session keeps the message until the client acknowledges
// it, and then gives it back (Recycle) for another response.
type ssResponse struct {
	m        mqtt.Message
	user     [3]mqtt.UserProperty
	envelope [ssEnvelope]byte
}

// ssResponses recycles the responses their clients acknowledged: a GET
// allocates nothing else, so without it each response would be the
// fresh memory of a heap that grows until the next collection.
var ssResponses = sync.Pool{New: func() any { return new(ssResponse) }}

// ssPoisoned is what a recycled response reads as under the race
// detector (ssPoison).
var ssPoisoned = []byte("recycled state store response")

// Recycle implements mqtt.Recycler: the session holds r's message no
// more. Nothing of r is written here: r was last touched when it was
// sent, 1-20 responses earlier, and is cold by its acknowledgement:
// clearing its payload and version here cost two stores' cache misses,
// which the pool's locked push then waited for, and newSSResponse pays
// them again when it rewrites r whole for its next request (together
// about 0.1 µs of each operation of BenchmarkStateStoreAzureCPU, measured
// in the thirteenth session: docs/performance-statestore.md). Until its
// reuse a pooled
// response keeps the reply and version text it last carried alive (a
// key's value, possibly overwritten since); the pool is dropped by the
// collector within two cycles, which bounds that.
func (r *ssResponse) Recycle(*mqtt.Message) {
	if ssPoison {
		for i := range r.envelope {
			r.envelope[i] = 0xEE
		}
		p := string(ssPoisoned)
		r.m = mqtt.Message{Topic: p, Payload: ssPoisoned, QoS: 1, ContentType: p, CorrelationData: ssPoisoned[:16]}
		r.user = [3]mqtt.UserProperty{{Key: p, Value: p}, {Key: p, Value: p}, {Key: p, Value: p}}
		r.m.User = r.user[:]
	}
	ssResponses.Put(r)
}

// ssEnvelope is the room in a response for its topic and correlation data
// (an Azure client's response topic is about 100 bytes, its correlation
// data 16); a longer envelope is copied into an allocation of its own.
const ssEnvelope = 160

// envelopeOf sets r's topic and correlation data to copies of req's.
func (r *ssResponse) envelopeOf(req *mqtt.Message) {
	b := r.envelope[:0]
	if len(req.ResponseTopic)+len(req.CorrelationData) > ssEnvelope {
		b = make([]byte, 0, len(req.ResponseTopic)+len(req.CorrelationData))
	}
	b = append(b, req.ResponseTopic...)
	b = append(b, req.CorrelationData...)
	// Written once here, never changed after: the topic may share it.
	if n := len(req.ResponseTopic); n > 0 {
		r.m.Topic = unsafe.String(&b[0], n)
	}
	if len(req.CorrelationData) > 0 {
		r.m.CorrelationData = b[len(req.ResponseTopic):len(b):len(b)]
	}
}

// newSSResponse returns a response to req (from ssResponses), its
// envelope set.
func newSSResponse(req *mqtt.Message) *ssResponse {
	r := ssResponses.Get().(*ssResponse)
	r.m = mqtt.Message{QoS: 1, ContentType: statestore.ContentType, Expiry: req.Expiry}
	r.envelopeOf(req)
	return r
}

// respondOK sends a 200 response: the properties of statestore.Reply's
// UserProperties, with the broker's version string reused when it is
// already in canonical form.
func (f *StateStoreFront) respondOK(round *mqtt.Round, clientID string, req *mqtt.Message, payload []byte, version string) {
	f.sendOK(round, mqtt.RoundClient{}, clientID, newSSResponse(req), payload, version)
}

// sendOK sends r (newSSResponse) as a 200 response with payload, through
// round when it is sent on a poller round (nil: not).
func (f *StateStoreFront) sendOK(round *mqtt.Round, rc mqtt.RoundClient, clientID string, r *ssResponse, payload []byte, version string) {
	r.m.Payload = payload
	r.user[0] = mqtt.UserProperty{Key: statestore.PropStatus, Value: statestore.Status200}
	r.user[1] = mqtt.UserProperty{Key: statestore.PropProtocolVersion, Value: statestore.ProtocolVersion}
	n := 2
	if ts, ok := ssCanonicalHLC(version); ok {
		r.user[2] = mqtt.UserProperty{Key: statestore.PropTimestamp, Value: ts}
		n = 3
	}
	m := &r.m
	m.User = r.user[:n:n]
	var err error
	if round != nil {
		err = round.SendToClientRecycled(rc, clientID, m, r)
	} else {
		err = f.srv.SendToRecycled(clientID, m, r)
	}
	if err != nil {
		f.log.Debug("state store response not delivered", "client", clientID, "err", err)
		r.Recycle(m) // not kept
	}
}

// ssCanonicalHLC returns the String form of the HLC s, and false when s
// is empty or not an HLC (the response then carries no __ts). s itself is
// returned when it is already canonical (15-digit ms, 5-digit counter).
func ssCanonicalHLC(s string) (string, bool) {
	if ssCanonicalShape(s) {
		// What every engine's version text is (HLC.String): no parse.
		return s, true
	}
	if s == "" {
		return "", false
	}
	v, err := statestore.ParseHLC(s)
	if err != nil || v.IsZero() {
		return "", false
	}
	if len(s) > 22 && s[15] == ':' && s[21] == ':' {
		return s, true
	}
	return v.String(), true
}

// ssCanonicalShape reports whether s is an HLC in its String form: 15
// digits, ':', 5 digits, ':' and a node id of 1 to MaxNodeIDLen bytes
// without ':'. Such a text parses (it is then never zero: its node id is
// not empty) and is its own String form, so ssCanonicalHLC returns it as
// it is; checking its shape costs a fraction of parsing it.
func ssCanonicalShape(s string) bool {
	if len(s) <= 22 || len(s) > 22+statestore.MaxNodeIDLen || s[15] != ':' || s[21] != ':' {
		return false
	}
	for i := 0; i < 21; i++ {
		if c := s[i]; (c < '0' || c > '9') && i != 15 {
			return false
		}
	}
	for i := 22; i < len(s); i++ {
		if s[i] == ':' {
			return false
		}
	}
	return true
}

// invokeAll serves a KEYNOTIFY ... PREFIX (cmd), which every shard must
// see: the first error reply wins; otherwise +OK, or :0 when a STOP found
// the watch on no shard. A SINCE backlog that responses carry (a broker
// of an earlier version's: a current one pushes it) is merged across
// shards in version order.
func (f *StateStoreFront) invokeAll(ctx context.Context, clientID string, cmd *statestore.Command, req *router.BrokerRequest) (*router.BrokerResponse, error) {
	all, err := f.router.InvokeAll(ctx, req)
	if err != nil {
		return nil, err
	}
	f.notePrefixWatch(clientID, cmd, all)
	out := &router.BrokerResponse{Reply: []byte(":0\r\n")}
	for _, r := range all {
		switch {
		case len(r.Reply) > 0 && r.Reply[0] == '-':
			return &router.BrokerResponse{Reply: r.Reply}, nil
		case string(r.Reply) == "+OK\r\n":
			out.Reply = r.Reply
		}
		out.Notifications = append(out.Notifications, r.Notifications...)
	}
	slices.SortStableFunc(out.Notifications, func(a, b router.BrokerNotification) int {
		va, _ := statestore.ParseHLC(a.Version)
		vb, _ := statestore.ParseHLC(b.Version)
		return va.Compare(vb)
	})
	return out, nil
}

func ssOctetStream(ct string) bool {
	rest, ok := strings.CutPrefix(ct, statestore.ContentType)
	return ok && (rest == "" || rest[0] == ';' || rest[0] == '+')
}

// respond puts a response into the requester's session.
func (f *StateStoreFront) respond(clientID string, req *mqtt.Message, payload []byte, props []statestore.UserProperty) {
	m := &mqtt.Message{Topic: strings.Clone(req.ResponseTopic), Payload: payload, QoS: 1, ContentType: statestore.ContentType,
		CorrelationData: bytes.Clone(req.CorrelationData), Expiry: req.Expiry}
	for _, p := range props {
		// A value may come from the request (its version, its content
		// type).
		m.User = append(m.User, mqtt.UserProperty{Key: p.Key, Value: strings.Clone(p.Value)})
	}
	if err := f.srv.SendTo(clientID, m); err != nil {
		f.log.Debug("state store response not delivered", "client", clientID, "err", err)
	}
}

func (f *StateStoreFront) respondError(clientID string, req *mqtt.Message, status, text, propName, propVal string) {
	props := []statestore.UserProperty{
		{Key: statestore.PropStatus, Value: status},
		{Key: statestore.PropStatusMessage, Value: text},
		{Key: statestore.PropProtocolVersion, Value: statestore.ProtocolVersion},
	}
	if propName != "" {
		props = append(props, statestore.UserProperty{Key: ssPropName, Value: propName})
	}
	if propVal != "" {
		props = append(props, statestore.UserProperty{Key: ssPropVal, Value: propVal})
	}
	f.respond(clientID, req, nil, props)
}

// pushNotifications puts each notification into its client's session,
// and raises the floors of the watches they are for
// (statestore_watch.go).
func (f *StateStoreFront) pushNotifications(ns []router.BrokerNotification) {
	if len(ns) == 0 {
		return
	}
	versions := make([]statestore.HLC, len(ns))
	for i := range ns {
		versions[i], _ = statestore.ParseHLC(ns[i].Version)
	}
	f.noteNotified(ns, versions)
	for i, n := range ns {
		sn := statestore.Notification{ClientID: n.ClientID, Key: string(n.Key), Op: statestore.Op(n.Op), Value: n.Value, Version: versions[i]}
		m := &mqtt.Message{Topic: sn.Topic(), Payload: sn.Payload(), QoS: 1, ContentType: statestore.ContentType}
		for _, p := range sn.UserProperties() {
			m.User = append(m.User, mqtt.UserProperty{Key: p.Key, Value: p.Value})
		}
		// Notifications are not queued for an offline session (the
		// protocol drops them; the client re-reads on reconnect).
		if err := f.srv.SendToConnected(n.ClientID, m); errors.Is(err, mqtt.ErrNoSession) {
			// Telling the brokers may wait: not on the caller's
			// goroutine (a poller, a broker connection's reader).
			id := n.ClientID
			f.group.Go(func() { f.clientGone(id) })
		} else if err != nil {
			f.log.Debug("state store notification not delivered", "client", n.ClientID, "err", err)
		}
	}
}

// clientGone drops a disconnected client's registrations on the brokers.
func (f *StateStoreFront) clientGone(clientID string) {
	f.mu.Lock()
	had := f.watchers[clientID]
	delete(f.watchers, clientID)
	delete(f.watches, clientID)
	f.mu.Unlock()
	if !had || f.group.Closed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.DropTimeout)
	defer cancel()
	if err := f.router.DropClient(ctx, clientID); err != nil {
		f.log.Warn("state store: drop client registrations", "client", clientID, "err", err)
	}
}

// StateStoreSessionHook wraps the mqtt server's Backend to learn when
// clients disconnect: the server saves (persistent session) or deletes
// (expiry 0) a session exactly when its connection ends, and deletes it
// on a clean start. Build the server on it and pass it in
// StateStoreFrontOptions.Hook.
type StateStoreSessionHook struct {
	mqtt.Backend
	gone atomic.Pointer[func(clientID string)]
}

// NewStateStoreSessionHook wraps b.
func NewStateStoreSessionHook(b mqtt.Backend) *StateStoreSessionHook {
	return &StateStoreSessionHook{Backend: b}
}

func (h *StateStoreSessionHook) set(fn func(string)) {
	if fn == nil {
		h.gone.Store(nil)
		return
	}
	h.gone.Store(&fn)
}

func (h *StateStoreSessionHook) fire(clientID string) {
	if fn := h.gone.Load(); fn != nil {
		(*fn)(clientID)
	}
}

// PublishAsync implements mqtt.AsyncBackend with the wrapped backend's
// PublishAsync, or its Publish when it has none.
func (h *StateStoreSessionHook) PublishAsync(ctx context.Context, msg *mqtt.Message, done func(error)) {
	if ab, ok := h.Backend.(mqtt.AsyncBackend); ok {
		ab.PublishAsync(ctx, msg, done)
		return
	}
	done(h.Backend.Publish(ctx, msg))
}

// SaveSession implements mqtt.Backend.
func (h *StateStoreSessionHook) SaveSession(ctx context.Context, s *mqtt.SessionState) error {
	h.fire(s.ClientID)
	return h.Backend.SaveSession(ctx, s)
}

// DeleteSession implements mqtt.Backend.
func (h *StateStoreSessionHook) DeleteSession(ctx context.Context, clientID string) error {
	h.fire(clientID)
	return h.Backend.DeleteSession(ctx, clientID)
}

// ssMutation reports whether a verb changes the store (its record goes to
// the shard's log).
func ssMutation(v statestore.Verb) bool {
	return v == statestore.VerbSet || v == statestore.VerbDel || v == statestore.VerbVDel
}

// deferToRound serves a mutation of a local shard in two steps when the
// broker defers it (router.InvokeCommandDeferred): its record is put now
// and the mutation applied and answered at the end of the poller's round
// (ssRoundEnd), where one drain writes the records of all the round's
// mutations with one pwrite. It reports false when the request is left
// to the other paths (nothing was done). now is the round's clock
// reading, by which the router judges the request's expiry.
//
// The handler returns without later: the request's PUBACK (a success:
// whatever the mutation's outcome, it is the response's) is queued when
// the handler returns, into the connection's output, which the round
// holds until its deferred work ran; the PUBACK and the answer then leave
// in the same write, the PUBACK first. (With later, each deferred
// mutation cost a queued acknowledgement, a copy of its topic and a
// completion closure: three allocations per SET.)
func (f *StateStoreFront) deferToRound(ctx context.Context, round *mqtt.Round, now time.Time, clientID string, msg *mqtt.Message, call *ssCall) bool {
	d, ok, err := f.router.InvokeCommandDeferred(ctx, now, msg.Expiry, &call.cmd, &call.req, &call.resp)
	if !ok {
		return false
	}
	if d == nil {
		// Answered now: a cached reply, an engine's error reply, an
		// error.
		f.answer(round, clientID, msg, &call.resp, err)
		ssCalls.Put(call)
		return true
	}
	// The request's bytes are the call's only (HandleInline): the
	// response carries copies of its envelope.
	e := ssRoundEnds.Get().(*ssRoundEnd)
	e.f, e.round, e.client, e.clientID, e.d, e.r = f, round, round.Client(), clientID, d, newSSResponse(msg)
	ssCalls.Put(call) // the broker copied what it keeps of the request
	round.Defer(e)
	return true
}

// ssRoundEnd is a mutation deferred to the poller round's end
// (deferToRound): the broker's pending mutation and the response built
// with the request's envelope.
type ssRoundEnd struct {
	f        *StateStoreFront
	round    *mqtt.Round      // the round it was deferred to, which runs it
	client   mqtt.RoundClient // the session the request came in on
	clientID string
	d        router.Deferred
	r        *ssResponse
	resp     router.BrokerResponse
}

var ssRoundEnds = sync.Pool{New: func() any { return new(ssRoundEnd) }}

// RoundEnd implements mqtt.RoundHook: the mutation is applied (the first
// of the round drains the store: one pwrite for the round's records; the
// broker pushes its notifications) and answered, as in answer.
func (e *ssRoundEnd) RoundEnd() {
	f := e.f
	if err := e.d.Complete(&e.resp); err != nil {
		env := mqtt.Message{ResponseTopic: e.r.m.Topic, CorrelationData: e.r.m.CorrelationData, Expiry: e.r.m.Expiry}
		f.answer(e.round, e.clientID, &env, nil, err) // copies the envelope
		e.r.Recycle(&e.r.m)
	} else {
		f.pushNotifications(e.resp.Notifications)
		f.sendOK(e.round, e.client, e.clientID, e.r, e.resp.Reply, e.resp.Version)
	}
	*e = ssRoundEnd{}
	ssRoundEnds.Put(e)
}
