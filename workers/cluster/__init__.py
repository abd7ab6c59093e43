"""Clustered temporary parameter servers: features, clustering, sync rules, protocol, process."""
