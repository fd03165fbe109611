"""The room core: rooms as one node serves them, with no sockets in sight.

A node (:mod:`.node`) folds each room's stored events (:mod:`.room`), decides what the
clock and the racers' requests change (:mod:`.lobby`, :mod:`.moves`, :mod:`.certify`),
builds fair spectator boards (:mod:`.spectators`) and answers requests
(:mod:`.requests`). It talks to connections only through :class:`.peer.Peer` — send
bytes, close, a connection id — so the whole core runs, and is unit-tested, with fake
peers and no network; :mod:`solrace.net` adapts it to WebSockets.
"""
