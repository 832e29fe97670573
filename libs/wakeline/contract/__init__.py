"""The contract between processes: the events of the log and the commands that ask for
them, their wire codec and limits, ids, the built-in and declared tools, and the topic
names. What a record on Kafka or a row in Postgres means is defined here and nowhere else.
Imports only `wakeline.runtime`."""
