// Package amqp is SmartGo's AMQP 0-9-1 engine, in the position of package
// mqtt: it speaks the protocol RabbitMQ clients use (connections,
// channels, exchanges and bindings, queues, deliveries and acks,
// publisher confirms) and knows nothing of RocketMQ. What must outlive
// the process goes through the Backend it defines; package bridge
// implements it on the broker. Package amqp/wire holds the frame and
// method codec.
package amqp
