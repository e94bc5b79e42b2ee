-- What a server keeps that belongs to no workspace: failed sign-ins are counted by client
-- address before anyone is known. Out of kb and search, whose every table is keyed by
-- workspace_id so that a distributed Postgres (Citus) can place each workspace on one node;
-- this one would stay local to the coordinator.
create schema server;
alter table kb.signin_failures set schema server;
