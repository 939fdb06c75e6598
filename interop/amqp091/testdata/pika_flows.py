"""The common AMQP 0-9-1 flows with Debian's python3-pika (BlockingConnection).

Usage: pika_flows.py URL PREFIX FLOW
FLOW is basic, confirms, topic, rpc or channel_error. Every name the flow
declares starts with PREFIX. It prints one JSON object with what it saw;
interop/amqp091/clients_test.go checks it. An unexpected error ends it
with a traceback and a non-zero exit.
"""
import json
import sys

import pika


def connect(url):
    return pika.BlockingConnection(pika.URLParameters(url))


def basic(conn, prefix):
    ch = conn.channel()
    q = prefix + ".basic"
    ch.queue_declare(q)
    ch.confirm_delivery()
    for i in range(10):
        ch.basic_publish("", q, ("msg %d" % i).encode(),
                         pika.BasicProperties(delivery_mode=2, content_type="text/plain"))
    ch.basic_qos(prefetch_count=3)
    bodies, redelivered = [], []

    def on_message(c, method, props, body):
        bodies.append(body.decode())
        redelivered.append(method.redelivered)
        c.basic_ack(method.delivery_tag)
        if len(bodies) == 10:
            c.stop_consuming()

    ch.basic_consume(q, on_message)
    ch.start_consuming()
    left = ch.queue_declare(q, passive=True).method.message_count
    ch.queue_delete(q)
    return {"bodies": bodies, "redelivered": redelivered, "left": left}


def confirms(conn, prefix):
    ch = conn.channel()
    q = prefix + ".confirms"
    ch.queue_declare(q)
    ch.confirm_delivery()
    acked = 0
    for i in range(100):
        ch.basic_publish("", q, str(i).encode())  # raises on a nack
        acked += 1
    unroutable = False
    try:
        ch.basic_publish("", prefix + ".nowhere", b"lost", mandatory=True)
    except pika.exceptions.UnroutableError:
        unroutable = True
    count = ch.queue_declare(q, passive=True).method.message_count
    ch.queue_delete(q)
    return {"acked": acked, "unroutable": unroutable, "count": count}


def topic(conn, prefix):
    ch = conn.channel()
    ex = prefix + ".topic"
    ch.exchange_declare(ex, "topic")
    binds = {prefix + ".orange": "*.orange.*", prefix + ".lazy": "lazy.#"}
    for q, key in binds.items():
        ch.queue_declare(q)
        ch.queue_bind(q, ex, key)
    ch.confirm_delivery()
    for key in ["quick.orange.rabbit", "lazy.orange.elephant", "lazy.brown.fox", "quick.brown.fox", "lazy", "orange"]:
        ch.basic_publish(ex, key, key.encode())
    got = {}
    for q in binds:
        bodies = []
        while True:
            method, _, body = ch.basic_get(q, auto_ack=True)
            if method is None:
                break
            bodies.append(body.decode())
        got[q[len(prefix) + 1:]] = bodies
        ch.queue_delete(q)
    ch.exchange_delete(ex)
    return got


def rpc(conn, prefix):
    server = conn.channel()
    rq = prefix + ".rpc"
    server.queue_declare(rq)
    client = conn.channel()
    reply = client.queue_declare("", exclusive=True).method.queue
    client.basic_publish("", rq, b"ping",
                         pika.BasicProperties(reply_to=reply, correlation_id="c-42"))
    # The server side: take the request, answer to reply_to.
    method, props = None, None
    while method is None:
        method, props, body = server.basic_get(rq)
        if method is None:
            conn.process_data_events(time_limit=0.05)
    server.basic_publish("", props.reply_to, body.upper(),
                         pika.BasicProperties(correlation_id=props.correlation_id))
    server.basic_ack(method.delivery_tag)
    out = {}

    def on_reply(c, m, p, b):
        out.update(body=b.decode(), correlation_id=p.correlation_id)
        c.stop_consuming()

    client.basic_consume(reply, on_reply, auto_ack=True, exclusive=True)
    client.start_consuming()
    server.queue_delete(rq)
    out["reply_queue"] = reply
    return out


def channel_error(conn, prefix):
    ch = conn.channel()
    code = None
    try:
        ch.queue_declare(prefix + ".missing", passive=True)
    except pika.exceptions.ChannelClosedByBroker as e:
        code = e.reply_code
    ok = conn.channel()
    q = prefix + ".after"
    ok.queue_declare(q)
    ok.confirm_delivery()
    ok.basic_publish("", q, b"still here")
    _, _, body = ok.basic_get(q, auto_ack=True)
    ok.queue_delete(q)
    return {"code": code, "channel_open": ch.is_open, "after": body.decode() if body else None}


def main():
    url, prefix, flow = sys.argv[1:4]
    flows = {"basic": basic, "confirms": confirms, "topic": topic, "rpc": rpc, "channel_error": channel_error}
    conn = connect(url)
    try:
        out = flows[flow](conn, prefix)
    finally:
        if conn.is_open:
            conn.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
