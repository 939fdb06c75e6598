package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
)

// amqpNodePage is one node's page of an AMQP listing, as -o json prints it.
type amqpNodePage[T any] struct {
	Node string `json:"node"`
	admin.AMQPPage[T]
}

// amqpListing is one `admin amqp` listing: its name, what it lists, its
// table and how a node is asked.
type amqpListing[T any] struct {
	name, what, key string
	vhost           bool // has -vhost
	header          []string
	row             func(T) []any
	list            func(a *admin.Admin, ctx context.Context, node string, q admin.AMQPQuery) (*admin.AMQPPage[T], error)
}

func (l amqpListing[T]) register() {
	synopsis := "[-node NODE] [-prefix P] [-after KEY] [-limit N]"
	if l.vhost {
		synopsis = "[-vhost V] " + synopsis
	}
	registerAdmin(adminCommand{name: "amqp " + l.name, synopsis: synopsis,
		summary: "AMQP 0-9-1 " + l.what + " of the bridge nodes",
		description: "Lists the AMQP 0-9-1 " + l.what + " of every bridge node (or of -node), as\n" +
			"rabbitmqctl list_" + l.name + " does, by " + l.key + ". Each node serves its own AMQP\n" +
			"server; the call reaches it through a registry. -o json prints each node's\n" +
			"page with its total and the -after of its next page.",
		examples: []string{"smartgo admin amqp " + l.name, "smartgo admin amqp " + l.name + " -node bridge-1 -o json"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			node := fs.String("node", "", "bridge `node` id (empty: every node)")
			vhost := new(string)
			if l.vhost {
				vhost = fs.String("vhost", "", "only this virtual `host` (empty: every one)")
			}
			query := pageFlags(fs, l.key, l.key)
			return func(ctx context.Context, e *adminEnv) error {
				mq, err := query()
				if err != nil {
					return err
				}
				nodes, err := e.a.BridgeNodeIDs(ctx, *node)
				if err != nil {
					return err
				}
				pages := make([]amqpNodePage[T], 0, len(nodes))
				for _, n := range nodes {
					p, err := l.list(e.a, ctx, n, admin.AMQPQuery{VHost: *vhost, MQTTQuery: mq})
					if err != nil {
						if *node == "" && errors.Is(err, client.ErrNotFound) {
							continue // the node left meanwhile
						}
						return fmt.Errorf("node %s: %w", n, err)
					}
					pages = append(pages, amqpNodePage[T]{Node: n, AMQPPage: *p})
				}
				e.out.table(pages, append([]string{"NODE"}, l.header...), func(add func(...any)) {
					for _, p := range pages {
						for _, it := range p.Items {
							add(append([]any{p.Node}, l.row(it)...)...)
						}
						if p.Next != "" {
							add(append([]any{p.Node, fmt.Sprintf("(%d in all; more: -after %s)", p.Total, p.Next)},
								make([]any, len(l.header)-1)...)...)
						}
					}
				})
				return nil
			}
		}})
}

// argsText is a table's text of AMQP arguments, sorted by name.
func argsText(args map[string]any) string {
	if len(args) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(args))
	for k, v := range args {
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// flags is a table's text of a queue's or exchange's flags.
func flags(pairs ...any) string {
	var out []string
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1].(bool) {
			out = append(out, pairs[i].(string))
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

func init() {
	amqpListing[admin.AMQPQueue]{name: "queues", what: "queues", key: "queue name", vhost: true,
		header: []string{"VHOST", "QUEUE", "FLAGS", "READY", "UNACKED", "BYTES", "CONSUMERS", "PUBLISHED", "DELIVERED", "ACKED", "ARGUMENTS"},
		row: func(q admin.AMQPQueue) []any {
			return []any{q.VHost, q.Name, flags("durable", q.Durable, "auto-delete", q.AutoDelete, "exclusive", q.Exclusive),
				q.Ready, q.Unacked, q.ReadyBytes, q.Consumers, q.Published, q.Delivered, q.Acked, argsText(q.Arguments)}
		},
		list: (*admin.Admin).AMQPQueues}.register()
	amqpListing[admin.AMQPExchange]{name: "exchanges", what: "exchanges", key: "exchange name", vhost: true,
		header: []string{"VHOST", "EXCHANGE", "TYPE", "FLAGS", "BINDINGS", "ARGUMENTS"},
		row: func(x admin.AMQPExchange) []any {
			name := x.Name
			if name == "" {
				name = "(default)"
			}
			return []any{x.VHost, name, x.Type, flags("durable", x.Durable, "auto-delete", x.AutoDelete, "internal", x.Internal),
				x.Bindings, argsText(x.Arguments)}
		},
		list: (*admin.Admin).AMQPExchanges}.register()
	amqpListing[admin.AMQPBinding]{name: "bindings", what: "bindings", key: "source exchange", vhost: true,
		header: []string{"VHOST", "SOURCE", "DESTINATION", "KIND", "ROUTING_KEY", "ARGUMENTS"},
		row: func(b admin.AMQPBinding) []any {
			return []any{b.VHost, b.Source, b.Destination, b.DestinationKind, fmt.Sprintf("%q", b.RoutingKey), argsText(b.Arguments)}
		},
		list: (*admin.Admin).AMQPBindings}.register()
	amqpListing[admin.AMQPConnection]{name: "connections", what: "client connections", key: "name (the client's address)",
		header: []string{"CONNECTION", "USER", "VHOST", "CHANNELS", "CLIENT", "STATE", "CONNECTED"},
		row: func(c admin.AMQPConnection) []any {
			client := c.Client
			if client == "" {
				client = "-"
			}
			state := c.State
			if state == "" {
				state = "-" // a node from before the state was listed
			}
			return []any{c.Name, c.User, c.VHost, c.Channels, client, state, fmtMillis(c.ConnectedAt)}
		},
		list: func(a *admin.Admin, ctx context.Context, node string, q admin.AMQPQuery) (*admin.AMQPConnectionPage, error) {
			return a.AMQPConnections(ctx, node, q)
		}}.register()
	amqpListing[admin.AMQPConsumer]{name: "consumers", what: "consumers", key: "queue", vhost: true,
		header: []string{"VHOST", "QUEUE", "TAG", "CONNECTION", "CHANNEL", "ACK", "PREFETCH", "UNACKED"},
		row: func(c admin.AMQPConsumer) []any {
			return []any{c.VHost, c.Queue, c.Tag, c.Connection, c.Channel, c.AckRequired, c.Prefetch, c.Unacked}
		},
		list: (*admin.Admin).AMQPConsumers}.register()

	registerAdmin(adminCommand{name: "amqp purge", synopsis: "-q QUEUE [-vhost V] [-node NODE]",
		summary: "drop the ready messages of an AMQP queue",
		description: "Drops the messages of an AMQP 0-9-1 queue that wait for delivery, as\n" +
			"queue.purge does (deliveries not acknowledged yet stay with their\n" +
			"consumers), on -node or on every bridge node that has the queue. A queue no\n" +
			"node has is an error.",
		examples: []string{"smartgo admin amqp purge -q orders", "smartgo admin amqp purge -q orders -vhost shop -node bridge-1"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			q := fs.String("q", "", "queue `name`")
			vhost := fs.String("vhost", "/", "virtual `host`")
			node := fs.String("node", "", "bridge `node` id (empty: every node)")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*q, "-q"); err != nil {
					return err
				}
				if err := required(*vhost, "-vhost"); err != nil {
					return err
				}
				res, err := e.a.PurgeAMQPQueue(ctx, *node, *vhost, *q)
				if err != nil {
					return err
				}
				parts := make([]string, len(res))
				for i, r := range res {
					parts[i] = fmt.Sprintf("%d messages on node %s", r.Purged, r.Node)
				}
				e.out.message(map[string]any{"queue": *q, "vhost": *vhost, "purged": res},
					fmt.Sprintf("queue %s (vhost %s) purged: %s", *q, *vhost, strings.Join(parts, ", ")))
				return nil
			}
		}})
	registerAdmin(adminCommand{name: "amqp close", synopsis: "-c CONNECTION [-reason TEXT] [-node NODE]",
		summary: "close an AMQP client connection",
		description: "Closes an AMQP 0-9-1 connection (named by its client's address, as\n" +
			"`smartgo admin amqp connections` shows it) with connection.close 320\n" +
			"CONNECTION_FORCED and the reason; its unacknowledged deliveries go back to\n" +
			"their queues. A connection no node has is an error.",
		examples: []string{"smartgo admin amqp close -c 10.0.0.7:51234", "smartgo admin amqp close -c 10.0.0.7:51234 -reason maintenance"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			name := fs.String("c", "", "connection `name` (the client's host:port)")
			reason := fs.String("reason", "closed by an administrator", "`text` the client is given")
			node := fs.String("node", "", "bridge `node` id (empty: whichever has the connection)")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*name, "-c"); err != nil {
					return err
				}
				n, err := e.a.CloseAMQPConnection(ctx, *node, *name, *reason)
				if err != nil {
					return err
				}
				e.out.message(map[string]any{"connection": *name, "node": n, "closed": true},
					fmt.Sprintf("connection %s closed on node %s", *name, n))
				return nil
			}
		}})
}
