package protocol

// AMQP 0-9-1 administration of a bridge node: the same MQTT_ADMIN call
// (9203, relayed by a registry to the node) with these ops. A listing
// follows MQTTAdminRequest's Prefix, After and Limit on its key (queue,
// exchange, connection name; a binding's source exchange; a consumer's
// queue) and VHost ("": every virtual host); a page never splits the
// entries of one key, so it may pass Limit by those. A node that does
// not serve AMQP answers empty pages, and Found false.
//
//	op                answer body
//	amqp-queues       AMQPQueuePage
//	amqp-exchanges    AMQPExchangePage
//	amqp-bindings     AMQPBindingPage
//	amqp-connections  AMQPConnectionPage
//	amqp-consumers    AMQPConsumerPage
//	amqp-purge        AMQPPurgeResult   (VHost, Name: the queue)
//	amqp-close        AMQPCloseResult   (Name: the connection, Reason)
const (
	AMQPOpQueues      = "amqp-queues"
	AMQPOpExchanges   = "amqp-exchanges"
	AMQPOpBindings    = "amqp-bindings"
	AMQPOpConnections = "amqp-connections"
	AMQPOpConsumers   = "amqp-consumers"
	AMQPOpPurge       = "amqp-purge"
	AMQPOpClose       = "amqp-close"
)

// AMQPQueueInfo is one queue of a node's AMQP server.
type AMQPQueueInfo struct {
	VHost      string         `json:"vhost"`
	Name       string         `json:"name"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"autoDelete"`
	Exclusive  bool           `json:"exclusive"`
	Owner      string         `json:"owner,omitempty"` // the exclusive owner's connection
	Arguments  map[string]any `json:"arguments,omitempty"`
	Ready      int64          `json:"ready"`
	Unacked    int64          `json:"unacked"`
	ReadyBytes int64          `json:"readyBytes"`
	Consumers  int            `json:"consumers"`
	Published  uint64         `json:"published"`
	Delivered  uint64         `json:"delivered"`
	Acked      uint64         `json:"acked"`
}

// AMQPExchangeInfo is one exchange.
type AMQPExchangeInfo struct {
	VHost      string         `json:"vhost"`
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"autoDelete"`
	Internal   bool           `json:"internal"`
	Arguments  map[string]any `json:"arguments,omitempty"`
	Bindings   int            `json:"bindings"`
}

// AMQPBindingInfo is one binding.
type AMQPBindingInfo struct {
	VHost           string         `json:"vhost"`
	Source          string         `json:"source"`
	Destination     string         `json:"destination"`
	DestinationKind string         `json:"destinationKind"` // queue or exchange
	RoutingKey      string         `json:"routingKey"`
	Arguments       map[string]any `json:"arguments,omitempty"`
}

// AMQPConnectionInfo is one client connection.
type AMQPConnectionInfo struct {
	Name        string `json:"name"` // the peer's address
	Local       string `json:"local"`
	User        string `json:"user"`
	VHost       string `json:"vhost"`
	Client      string `json:"client,omitempty"`
	Channels    int    `json:"channels"`
	ConnectedAt int64  `json:"connectedAt"` // Unix milliseconds
	State       string `json:"state"`       // "running", "blocking" or "blocked" (a resource alarm)
}

// AMQPConsumerInfo is one consumer.
type AMQPConsumerInfo struct {
	VHost       string `json:"vhost"`
	Queue       string `json:"queue"`
	Tag         string `json:"tag"`
	Connection  string `json:"connection"`
	Channel     uint16 `json:"channel"`
	AckRequired bool   `json:"ackRequired"`
	Exclusive   bool   `json:"exclusive"`
	Prefetch    int    `json:"prefetch"`
	Unacked     int    `json:"unacked"`
}

// AMQPPage is a page of one AMQP listing.
type AMQPPage[T any] struct {
	Items []T    `json:"items"`
	Total int    `json:"total"`          // entries matching Prefix
	Next  string `json:"next,omitempty"` // After for the next page; "" at the end
}

// The pages of the AMQP listings.
type (
	AMQPQueuePage      = AMQPPage[AMQPQueueInfo]
	AMQPExchangePage   = AMQPPage[AMQPExchangeInfo]
	AMQPBindingPage    = AMQPPage[AMQPBindingInfo]
	AMQPConnectionPage = AMQPPage[AMQPConnectionInfo]
	AMQPConsumerPage   = AMQPPage[AMQPConsumerInfo]
)

// AMQPPurgeResult answers amqp-purge.
type AMQPPurgeResult struct {
	Found  bool `json:"found"` // the node has the queue
	Purged int  `json:"purged"`
}

// AMQPCloseResult answers amqp-close.
type AMQPCloseResult struct {
	Found bool `json:"found"` // the node had the connection (now closing)
}
