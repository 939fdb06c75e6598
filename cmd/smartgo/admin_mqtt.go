package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/smartgo/smartgo/client/admin"
)

// printBridges writes the bridge node table after `admin cluster`.
func printBridges(out *output, bridges []admin.BridgeNode) {
	if out.err != nil {
		return
	}
	fmt.Fprintln(out.w)
	out.table(bridges, []string{"BRIDGE_NODE", "ADDRS", "VERSION", "UPTIME", "CONNECTIONS", "SESSIONS", "CLUSTER_SESSIONS", "RETAINED"},
		func(add func(...any)) {
			for _, b := range bridges {
				up := "-"
				if b.StartedAt > 0 {
					up = time.Since(time.UnixMilli(b.StartedAt)).Truncate(time.Second).String()
				}
				add(b.Node, strings.Join(b.Addrs, ","), b.Version, up, b.Connections, b.Sessions, b.ClusterSessions, b.Retained)
			}
		})
}

// mqttQueryFlags are the paging flags of the MQTT listings.
func mqttQueryFlags(fs *cmdFlags) func() (admin.MQTTQuery, error) {
	return pageFlags(fs, "client id (topic, for retained)", "client id or topic")
}

// pageFlags are the paging flags of a listing by key (what the entries'
// key is, in the help of -prefix and of -after).
func pageFlags(fs *cmdFlags, prefixKey, afterKey string) func() (admin.MQTTQuery, error) {
	prefix := fs.String("prefix", "", "only entries whose "+prefixKey+" starts with `P`")
	after := fs.String("after", "", "start after this "+afterKey+" (the previous page's next)")
	limit := fs.Int("limit", admin.DefaultMQTTLimit, "page `size` (1.."+strconv.Itoa(admin.MaxMQTTLimit)+")")
	return func() (admin.MQTTQuery, error) {
		if *limit < 1 || *limit > admin.MaxMQTTLimit {
			return admin.MQTTQuery{}, usagef("-limit must be between 1 and %d, not %d", admin.MaxMQTTLimit, *limit)
		}
		return admin.MQTTQuery{Prefix: *prefix, After: *after, Limit: *limit}, nil
	}
}

// anyNode returns node, or the first bridge node the registries know.
func anyNode(ctx context.Context, a *admin.Admin, node string) (string, error) {
	if node != "" {
		return node, nil
	}
	bs, err := a.Bridges(ctx)
	if err != nil {
		return "", err
	}
	if len(bs) == 0 {
		return "", fmt.Errorf("no MQTT bridge node is registered with the registries")
	}
	return bs[0].Node, nil
}

func subsText(subs []admin.MQTTSubscription) string {
	parts := make([]string, len(subs))
	for i, s := range subs {
		parts[i] = fmt.Sprintf("%s@%d", s.Filter, s.QoS)
	}
	return strings.Join(parts, " ")
}

func init() {
	registerAdmin(adminCommand{name: "mqtt clients", synopsis: "[-node NODE] [-prefix P] [-after ID] [-limit N]",
		summary: "MQTT clients connected to the bridge nodes",
		description: "Lists the MQTT clients connected to every bridge node (or to -node): client\n" +
			"id, node, address, protocol version, keep alive, subscriptions and QoS 1/2\n" +
			"messages in flight. The call reaches each node through a registry.",
		examples: []string{"smartgo admin mqtt clients", "smartgo admin mqtt clients -prefix sensor- -o json"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			node := fs.String("node", "", "bridge `node` id (empty: every node)")
			query := mqttQueryFlags(fs)
			return func(ctx context.Context, e *adminEnv) error {
				q, err := query()
				if err != nil {
					return err
				}
				nodes := []string{*node}
				if *node == "" {
					bs, err := e.a.Bridges(ctx)
					if err != nil {
						return err
					}
					nodes = nodes[:0]
					for _, b := range bs {
						nodes = append(nodes, b.Node)
					}
				}
				var all []admin.MQTTClient
				for _, n := range nodes {
					p, err := e.a.MQTTClients(ctx, n, q)
					if err != nil {
						return err
					}
					all = append(all, p.Items...)
				}
				e.out.table(all, []string{"CLIENT_ID", "NODE", "ADDR", "VERSION", "KEEP_ALIVE", "INFLIGHT", "SUBSCRIPTIONS"}, func(add func(...any)) {
					for _, c := range all {
						add(c.ClientID, c.Node, c.RemoteAddr, c.Version, fmt.Sprintf("%ds", c.KeepAliveSecs), c.Inflight, subsText(c.Subscriptions))
					}
				})
				return nil
			}
		}})
	registerAdmin(adminCommand{name: "mqtt sessions", synopsis: "[-node NODE] [-prefix P] [-after ID] [-limit N]",
		summary: "the cluster's persistent MQTT sessions, connected or not",
		description: "Lists the persistent MQTT sessions of the cluster, offline ones included, as\n" +
			"a bridge node's copy of the session topic holds them (every node holds all\n" +
			"of them; -node picks which one answers).",
		examples: []string{"smartgo admin mqtt sessions", "smartgo admin mqtt sessions -prefix dev -limit 100"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			node := fs.String("node", "", "bridge `node` id to ask (empty: any)")
			query := mqttQueryFlags(fs)
			return func(ctx context.Context, e *adminEnv) error {
				q, err := query()
				if err != nil {
					return err
				}
				n, err := anyNode(ctx, e.a, *node)
				if err != nil {
					return err
				}
				p, err := e.a.MQTTSessions(ctx, n, q)
				if err != nil {
					return err
				}
				e.out.table(p, []string{"CLIENT_ID", "NODE", "ONLINE", "EXPIRY", "DISCONNECTED", "PENDING", "SUBSCRIPTIONS"}, func(add func(...any)) {
					for _, s := range p.Items {
						add(s.ClientID, s.Node, s.Online, fmt.Sprintf("%ds", s.ExpirySecs), fmtMillis(s.DisconnectedAt), s.Pending, subsText(s.Subscriptions))
					}
				})
				return nil
			}
		}})
	registerAdmin(adminCommand{name: "mqtt retained", synopsis: "[-node NODE] [-prefix TOPIC] [-after TOPIC] [-limit N]",
		summary: "the cluster's retained MQTT messages",
		description: "Lists the retained MQTT messages of the cluster by topic, as a bridge node's\n" +
			"copy of the retained topic holds them (payloads cut at 4 KiB).",
		examples: []string{"smartgo admin mqtt retained", "smartgo admin mqtt retained -prefix devices/ -o json"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			node := fs.String("node", "", "bridge `node` id to ask (empty: any)")
			query := mqttQueryFlags(fs)
			return func(ctx context.Context, e *adminEnv) error {
				q, err := query()
				if err != nil {
					return err
				}
				n, err := anyNode(ctx, e.a, *node)
				if err != nil {
					return err
				}
				p, err := e.a.MQTTRetained(ctx, n, q)
				if err != nil {
					return err
				}
				e.out.table(p, []string{"TOPIC", "QOS", "SIZE", "PAYLOAD"}, func(add func(...any)) {
					for _, r := range p.Items {
						add(r.Topic, r.QoS, r.Size, quoteCut(r.Payload))
					}
				})
				return nil
			}
		}})
	registerAdmin(adminCommand{name: "mqtt disconnect", synopsis: "-client ID [-node NODE]",
		summary: "disconnect an MQTT client",
		description: "Disconnects an MQTT client from the node it is connected to (an MQTT 5\n" +
			"client gets DISCONNECT 0x98, administrative action). Its session stays as\n" +
			"it asked: a persistent session is kept and its will is published. A client\n" +
			"that no node has connected is an error.",
		examples: []string{"smartgo admin mqtt disconnect -client sensor-17"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			id := fs.String("client", "", "MQTT client `id`")
			node := fs.String("node", "", "bridge `node` id (empty: whichever has the client)")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*id, "-client"); err != nil {
					return err
				}
				n, err := e.a.DisconnectMQTTClient(ctx, *node, *id)
				if err != nil {
					return err
				}
				e.out.message(map[string]any{"clientId": *id, "node": n, "disconnected": true},
					fmt.Sprintf("client %s disconnected from node %s", *id, n))
				return nil
			}
		}})
}

func init() {
	registerAdmin(adminCommand{name: "statestore keys", synopsis: "[-prefix P] [-after KEY] [-limit N]",
		summary: "state store keys with their versions and values",
		description: "Lists the state store's keys that start with -prefix, in byte order, from\n" +
			"every broker group's shards (its master's, or its slave's while it has\n" +
			"none): key, shard, version (HLC), value size and value (cut at 1 KiB).\n" +
			"When more keys follow, ask again with -after set to the last key shown.\n" +
			"Broker groups that do not answer are named after the keys (exit 1).",
		examples: []string{"smartgo admin statestore keys -prefix device-7/", "smartgo admin statestore keys -o json -limit 10"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			prefix := fs.String("prefix", "", "key `prefix`")
			after := fs.String("after", "", "start after this `key`")
			limit := fs.Int("limit", 100, "page `size` (1.."+strconv.Itoa(admin.MaxStateStoreLimit)+")")
			return func(ctx context.Context, e *adminEnv) error {
				if *limit < 1 || *limit > admin.MaxStateStoreLimit {
					return usagef("-limit must be between 1 and %d, not %d", admin.MaxStateStoreLimit, *limit)
				}
				q := admin.StateStoreQuery{Prefix: []byte(*prefix), Limit: *limit}
				if *after != "" {
					q.After = []byte(*after)
				}
				p, err := e.a.StateStoreKeys(ctx, q)
				if err != nil && !errors.Is(err, admin.ErrPartial) {
					return err
				}
				e.out.table(p, []string{"KEY", "SHARD", "VERSION", "SIZE", "VALUE"}, func(add func(...any)) {
					for _, k := range p.Keys {
						add(strconv.Quote(string(k.Key)), k.Shard, k.Version, k.Size, quoteCut(k.Value))
					}
					if p.More {
						add("(more: -after the last key)", "", "", "", "")
					}
				})
				return err // ErrPartial: the keys lack the broker groups it names
			}
		}})
}
