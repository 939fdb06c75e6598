package console

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/smartgo/smartgo/client/admin"
)

// The AMQP 0-9-1 view: every bridge node's queues and connections (each
// node serves its own AMQP server), purging a queue, closing a
// connection.

// Rows of the AMQP listings: an item with the node that answered it.
type (
	amqpQueueRow struct {
		Node string `json:"node"`
		admin.AMQPQueue
	}
	amqpConnectionRow struct {
		Node string `json:"node"`
		admin.AMQPConnection
	}
)

// amqpPage is what the AMQP listings answer: every node's items, their
// total, and the smallest next cursor among the nodes.
type amqpPage struct {
	Items []any  `json:"items"`
	Total int    `json:"total"`
	Next  string `json:"next,omitempty"`
}

// amqpAll asks every node (or ?node=) at once for a page of an AMQP
// listing; a node that does not answer is left out and named in
// PartialHeader.
func amqpAll[T any](c *Console, w http.ResponseWriter, r *http.Request,
	list func(ctx context.Context, node string, q admin.AMQPQuery) (*admin.AMQPPage[T], error), row func(node string, it T) any) {
	mq, err := mqttQuery(r)
	if err != nil {
		fail(w, err)
		return
	}
	q := admin.AMQPQuery{VHost: r.URL.Query().Get("vhost"), MQTTQuery: mq}
	nodes, err := c.nodes(r)
	if err != nil {
		fail(w, err)
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	pages := make([]*admin.AMQPPage[T], len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pages[i], errs[i] = list(ctx, n, q)
		}()
	}
	wg.Wait()
	out := amqpPage{Items: []any{}}
	var failed []string
	for i, p := range pages {
		if errs[i] != nil {
			failed = append(failed, "bridge node "+nodes[i]+": "+errs[i].Error())
			continue
		}
		for _, it := range p.Items {
			out.Items = append(out.Items, row(nodes[i], it))
		}
		out.Total += p.Total
		if p.Next != "" && (out.Next == "" || p.Next < out.Next) {
			out.Next = p.Next
		}
	}
	if len(failed) > 0 && len(failed) == len(nodes) {
		fail(w, errs[0])
		return
	}
	if len(failed) > 0 {
		setPartial(w, "some bridge nodes did not answer: "+strings.Join(failed, "; "))
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *Console) apiAMQPQueues(w http.ResponseWriter, r *http.Request, _ *session) {
	amqpAll(c, w, r, c.adm.AMQPQueues, func(n string, q admin.AMQPQueue) any { return amqpQueueRow{n, q} })
}

func (c *Console) apiAMQPConnections(w http.ResponseWriter, r *http.Request, _ *session) {
	amqpAll(c, w, r, c.adm.AMQPConnections, func(n string, x admin.AMQPConnection) any { return amqpConnectionRow{n, x} })
}

func (c *Console) apiAMQPPurge(w http.ResponseWriter, r *http.Request, s *session) {
	var req struct {
		Node  string `json:"node"`
		VHost string `json:"vhost"`
		Queue string `json:"queue"`
	}
	if err := decodeBody(r, &req); err != nil {
		fail(w, err)
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	res, err := c.adm.PurgeAMQPQueue(ctx, req.Node, req.VHost, req.Queue)
	if err != nil {
		fail(w, err)
		return
	}
	c.log.Info("console: AMQP queue purged", "queue", req.Queue, "vhost", req.VHost, "purged", res, "user", s.user)
	writeJSON(w, http.StatusOK, map[string]any{"queue": req.Queue, "vhost": req.VHost, "purged": res})
}

func (c *Console) apiAMQPClose(w http.ResponseWriter, r *http.Request, s *session) {
	var req struct {
		Node   string `json:"node"`
		Name   string `json:"name"`
		Reason string `json:"reason"`
	}
	if err := decodeBody(r, &req); err != nil {
		fail(w, err)
		return
	}
	if req.Reason == "" {
		req.Reason = "closed from the console by " + s.user
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	node, err := c.adm.CloseAMQPConnection(ctx, req.Node, req.Name, req.Reason)
	if err != nil {
		fail(w, err)
		return
	}
	c.log.Info("console: AMQP connection closed", "connection", req.Name, "node", node, "user", s.user)
	writeJSON(w, http.StatusOK, map[string]any{"connection": req.Name, "node": node, "closed": true})
}
