package amqp

import "context"

// Backend stores what must outlive the process: the durable exchanges,
// queues and bindings, and the messages of durable queues. The engine
// calls it from several goroutines at once; implementations must be safe
// for concurrent use. With no Backend (Options.Backend nil) everything
// lives in memory and a durable entity lasts until the process ends.
type Backend interface {
	// LoadDefinitions returns the definitions saved last, or empty
	// definitions on a first start.
	LoadDefinitions(ctx context.Context) (Definitions, error)
	// SaveDefinitions replaces the saved definitions. The engine calls it
	// after each change to a durable entity and answers the client's
	// declare, bind or delete only after it returned nil.
	SaveDefinitions(ctx context.Context, d Definitions) error
	// OpenQueue opens the message log of the durable queue, creating an
	// empty one if it has none.
	OpenQueue(ctx context.Context, vhost, name string) (QueueLog, error)
	// DeleteQueue removes a durable queue's messages and committed
	// offset, so that a queue declared later under the name starts
	// empty. The engine closes the queue's QueueLog first.
	DeleteQueue(ctx context.Context, vhost, name string) error
}

// Definitions are the durable entities of every virtual host.
type Definitions struct {
	Exchanges []ExchangeDef
	Queues    []QueueDef
	Bindings  []BindingDef
}

// ExchangeDef is a durable exchange. Arguments is the declare's field
// table as encoded on the wire (AMQP 0-9-1 §4.2.5.5, without the leading
// length), empty when there were none.
type ExchangeDef struct {
	VHost, Name, Type    string
	AutoDelete, Internal bool
	Arguments            []byte
}

// QueueDef is a durable queue (exclusive queues are never durable).
type QueueDef struct {
	VHost, Name string
	AutoDelete  bool
	Arguments   []byte
}

// BindingDef binds a durable queue, or a durable exchange when ToExchange
// is set (exchange.bind), to a durable source exchange.
type BindingDef struct {
	VHost, Source, Destination string
	ToExchange                 bool
	RoutingKey                 string
	Arguments                  []byte
}

// QueueLog is the message log of one durable queue: messages in the order
// they were appended, each at a consecutive offset, and a committed offset
// below which every message was acknowledged.
type QueueLog interface {
	// Append stores msgs. done is called exactly once, from any goroutine,
	// when all of them are durable (err nil; first is the offset of
	// msgs[0], the others follow it) or when they cannot be stored. Calls
	// to done for successive Appends may come in any order; the offsets
	// follow the order of the Append calls.
	Append(msgs []StoredMessage, done func(first uint64, err error))
	// Read returns up to max messages at offset from or after it, in
	// order, with Offset set; none when from is at the end.
	Read(ctx context.Context, from uint64, max int) ([]StoredMessage, error)
	// Committed returns the offset saved by the last Commit (0 for a new
	// queue): the first message that may not have been acknowledged.
	Committed(ctx context.Context) (uint64, error)
	// Commit records that every message below offset was acknowledged
	// (or purged). Offsets only move forward; a smaller one is ignored.
	Commit(ctx context.Context, offset uint64) error
	// Close releases the log; it waits for the done calls of pending
	// Appends.
	Close() error
}

// StoredMessage is one message as the engine hands it to a QueueLog and
// reads it back. Properties is the content header's property flags and
// property list exactly as the publisher sent them (AMQP 0-9-1 §4.2.6.1,
// after the class id, weight and body size), so a delivery copies them
// unchanged.
type StoredMessage struct {
	Offset     uint64 // set by Read; ignored by Append
	Exchange   string
	RoutingKey string
	Properties []byte
	Body       []byte
}
