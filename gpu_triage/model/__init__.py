"""The ground floor's model: typed facts, their catalogue, snapshots, and the facts people
supply beside a collection. Everything else imports this; it imports nothing above it."""
