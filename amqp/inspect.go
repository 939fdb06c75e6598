package amqp

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
)

// The operator's view of the server: what `rabbitmqctl list_queues`,
// list_exchanges, list_bindings, list_connections and list_consumers
// show, and two actions (purge a queue, close a connection). Each call
// copies what it returns under Server.mu and does no I/O while it holds
// it, so it is safe beside any traffic.

// ErrNotFound is returned by PurgeQueue and CloseConnection for a queue,
// virtual host or connection the server does not have.
var ErrNotFound = errors.New("amqp: not found")

// queueCounts are a queue's message counters since it was declared (or
// recovered). Guarded by Server.mu.
type queueCounts struct {
	published, delivered, acked uint64
}

// QueueInfo is one queue at one moment.
type QueueInfo struct {
	VHost      string         `json:"vhost"`
	Name       string         `json:"name"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"autoDelete"`
	Exclusive  bool           `json:"exclusive"`
	Owner      string         `json:"owner,omitempty"` // the exclusive owner's connection name
	Arguments  map[string]any `json:"arguments,omitempty"`
	Ready      int64          `json:"ready"`      // messages ready for delivery
	Unacked    int64          `json:"unacked"`    // delivered, not acknowledged yet
	ReadyBytes int64          `json:"readyBytes"` // body bytes of the ready messages
	Consumers  int            `json:"consumers"`
	// Counters since the queue was declared or recovered by this process.
	Published uint64 `json:"published"` // messages routed into the queue
	Delivered uint64 `json:"delivered"` // deliveries and basic.get answers, redeliveries included
	Acked     uint64 `json:"acked"`     // deliveries acknowledged by clients
}

// ExchangeInfo is one exchange.
type ExchangeInfo struct {
	VHost      string         `json:"vhost"`
	Name       string         `json:"name"` // "" is the default exchange
	Type       string         `json:"type"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"autoDelete"`
	Internal   bool           `json:"internal"`
	Arguments  map[string]any `json:"arguments,omitempty"`
	Bindings   int            `json:"bindings"` // bindings with this exchange as their source
}

// BindingInfo is one binding (queue.bind or exchange.bind). The default
// exchange's implicit bindings (to every queue by its name) are not
// listed.
type BindingInfo struct {
	VHost           string         `json:"vhost"`
	Source          string         `json:"source"`
	Destination     string         `json:"destination"`
	DestinationKind string         `json:"destinationKind"` // "queue" or "exchange"
	RoutingKey      string         `json:"routingKey"`
	Arguments       map[string]any `json:"arguments,omitempty"`
}

// ConnectionInfo is one open connection (after connection.open).
type ConnectionInfo struct {
	Name        string `json:"name"` // the peer's address: CloseConnection's key
	Local       string `json:"local"`
	User        string `json:"user"`
	VHost       string `json:"vhost"`
	Client      string `json:"client,omitempty"` // product and version from the client's properties
	Channels    int    `json:"channels"`
	ConnectedAt int64  `json:"connectedAt"` // Unix milliseconds
	// State is RabbitMQ's: "running"; while a resource alarm is raised
	// (AlarmSource) "blocked" for a connection held at a publish and
	// "blocking" for one that would be if it published.
	State string `json:"state"`
}

// Connection states (ConnectionInfo.State).
const (
	StateRunning  = "running"
	StateBlocking = "blocking"
	StateBlocked  = "blocked"
)

// ConsumerInfo is one consumer (basic.consume).
type ConsumerInfo struct {
	VHost       string `json:"vhost"`
	Queue       string `json:"queue"`
	Tag         string `json:"tag"`
	Connection  string `json:"connection"`
	Channel     uint16 `json:"channel"`
	AckRequired bool   `json:"ackRequired"`
	Exclusive   bool   `json:"exclusive"`
	Prefetch    int    `json:"prefetch"` // 0: unlimited
	Unacked     int    `json:"unacked"`
}

// vhostsOf returns the virtual host named name ("": every one), in
// name order, or ErrNotFound. Server.mu held.
func (s *Server) vhostsOf(name string) ([]*vhost, error) {
	if name != "" {
		vh := s.vhosts[name]
		if vh == nil {
			return nil, fmt.Errorf("%w: virtual host %q", ErrNotFound, name)
		}
		return []*vhost{vh}, nil
	}
	out := make([]*vhost, 0, len(s.vhosts))
	for _, vh := range s.vhosts {
		out = append(out, vh)
	}
	slices.SortFunc(out, func(a, b *vhost) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// Queues returns the queues of vhost ("": every virtual host), sorted by
// virtual host and name.
func (s *Server) Queues(vhost string) ([]QueueInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vhs, err := s.vhostsOf(vhost)
	if err != nil {
		return nil, err
	}
	var out []QueueInfo
	for _, vh := range vhs {
		start := len(out)
		for _, q := range vh.queues {
			qi := QueueInfo{VHost: vh.name, Name: q.name, Durable: q.durable, AutoDelete: q.autoDelete,
				Exclusive: q.exclusive, Arguments: plainTable(q.args), Ready: int64(q.readyLen()),
				Unacked: int64(q.unacked), ReadyBytes: q.readyBytes, Consumers: len(q.consumers),
				Published: q.counts.published, Delivered: q.counts.delivered, Acked: q.counts.acked}
			if q.owner != nil {
				qi.Owner = q.owner.name()
			}
			out = append(out, qi)
		}
		slices.SortFunc(out[start:], func(a, b QueueInfo) int { return strings.Compare(a.Name, b.Name) })
	}
	return out, nil
}

// Exchanges returns the exchanges of vhost ("": every virtual host), the
// built-in ones included, sorted by virtual host and name.
func (s *Server) Exchanges(vhost string) ([]ExchangeInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vhs, err := s.vhostsOf(vhost)
	if err != nil {
		return nil, err
	}
	var out []ExchangeInfo
	for _, vh := range vhs {
		start := len(out)
		for _, x := range vh.exchanges {
			out = append(out, ExchangeInfo{VHost: vh.name, Name: x.name, Type: x.typ, Durable: x.durable,
				AutoDelete: x.autoDelete, Internal: x.internal, Arguments: plainTable(x.args), Bindings: len(x.bindings)})
		}
		slices.SortFunc(out[start:], func(a, b ExchangeInfo) int { return strings.Compare(a.Name, b.Name) })
	}
	return out, nil
}

// Bindings returns the bindings of vhost ("": every virtual host), sorted
// by virtual host, source, destination and routing key.
func (s *Server) Bindings(vhost string) ([]BindingInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vhs, err := s.vhostsOf(vhost)
	if err != nil {
		return nil, err
	}
	var out []BindingInfo
	for _, vh := range vhs {
		start := len(out)
		for _, x := range vh.exchanges {
			for _, b := range x.bindings {
				bi := BindingInfo{VHost: vh.name, Source: x.name, RoutingKey: b.key, Arguments: plainTable(b.args)}
				if b.dstQ != nil {
					bi.Destination, bi.DestinationKind = b.dstQ.name, "queue"
				} else {
					bi.Destination, bi.DestinationKind = b.dstX.name, "exchange"
				}
				out = append(out, bi)
			}
		}
		slices.SortFunc(out[start:], func(a, b BindingInfo) int {
			if c := strings.Compare(a.Source, b.Source); c != 0 {
				return c
			}
			if c := strings.Compare(a.Destination, b.Destination); c != 0 {
				return c
			}
			return strings.Compare(a.RoutingKey, b.RoutingKey)
		})
	}
	return out, nil
}

// Connections returns the open connections, sorted by name.
func (s *Server) Connections() []ConnectionInfo {
	_, alarm := s.alarm.get()
	s.mu.Lock()
	out := make([]ConnectionInfo, 0, len(s.conns))
	for c := range s.conns {
		state := StateRunning
		switch {
		case c.blocked.Load():
			state = StateBlocked
		case alarm != nil:
			state = StateBlocking
		}
		out = append(out, ConnectionInfo{Name: c.name(), Local: c.nc.LocalAddr().String(), User: c.user,
			VHost: c.vh.name, Client: c.client, Channels: len(c.channels), ConnectedAt: c.since.UnixMilli(), State: state})
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b ConnectionInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Consumers returns the consumers of vhost ("": every virtual host),
// sorted by virtual host, queue, connection, channel and tag.
func (s *Server) Consumers(vhost string) ([]ConsumerInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vhs, err := s.vhostsOf(vhost)
	if err != nil {
		return nil, err
	}
	var out []ConsumerInfo
	for _, vh := range vhs {
		start := len(out)
		for _, q := range vh.queues {
			for _, cons := range q.consumers {
				out = append(out, ConsumerInfo{VHost: vh.name, Queue: q.name, Tag: cons.tag, Connection: cons.ch.c.name(),
					Channel: cons.ch.id, AckRequired: !cons.noAck, Exclusive: cons.exclusive, Prefetch: cons.prefetch,
					Unacked: cons.unacked})
			}
		}
		slices.SortFunc(out[start:], func(a, b ConsumerInfo) int {
			if c := strings.Compare(a.Queue, b.Queue); c != 0 {
				return c
			}
			if c := strings.Compare(a.Connection, b.Connection); c != 0 {
				return c
			}
			if a.Channel != b.Channel {
				return int(a.Channel) - int(b.Channel)
			}
			return strings.Compare(a.Tag, b.Tag)
		})
	}
	return out, nil
}

// PurgeQueue drops the ready messages of a queue (as queue.purge does;
// unacknowledged deliveries stay with their consumers) and returns how
// many it dropped. An exclusive queue may be purged too. A missing queue
// or virtual host is an error wrapping ErrNotFound.
func (s *Server) PurgeQueue(vhost, name string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vh := s.vhosts[vhost]
	if vh == nil {
		return 0, fmt.Errorf("%w: virtual host %q", ErrNotFound, vhost)
	}
	q := vh.queues[name]
	if q == nil {
		return 0, fmt.Errorf("%w: queue %q in virtual host %q", ErrNotFound, name, vhost)
	}
	return s.purge(q), nil
}

// CloseConnection closes the connection named name (ConnectionInfo.Name)
// with connection.close 320 CONNECTION_FORCED and reason as its text; the
// client's channels and consumers end and its unacknowledged deliveries
// go back to their queues. A missing connection is an error wrapping
// ErrNotFound.
func (s *Server) CloseConnection(name, reason string) error {
	if reason == "" {
		reason = "closed by an administrator"
	}
	s.mu.Lock()
	var found *conn
	for c := range s.conns {
		if c.name() == name {
			found = c
			break
		}
	}
	s.mu.Unlock()
	if found == nil {
		return fmt.Errorf("%w: connection %q", ErrNotFound, name)
	}
	found.forceCloseReason(reason)
	return nil
}

// name is the connection's name in the operator's view: the peer's
// address.
func (c *conn) name() string { return c.nc.RemoteAddr().String() }

// clientName is "product version" from a client's properties.
func clientName(props wire.Table) string {
	p, _ := stringArg(props["product"])
	v, _ := stringArg(props["version"])
	return strings.TrimSpace(p + " " + v)
}

// plainTable turns field table values into what encoding/json renders
// readably: byte strings become strings, decimals and timestamps text.
func plainTable(t wire.Table) map[string]any {
	if len(t) == 0 {
		return nil
	}
	out := make(map[string]any, len(t))
	for k, v := range t {
		out[k] = plainValue(v)
	}
	return out
}

func plainValue(v any) any {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case wire.Table:
		return plainTable(x)
	case map[string]any:
		return plainTable(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainValue(e)
		}
		return out
	case wire.Decimal:
		return fmt.Sprintf("%de-%d", x.Value, x.Scale)
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	}
	return v
}
