# SPDX-License-Identifier: MIT
"""All ranks to all ranks through a torch.distributed Store.

    w = tern.world.from_store(store, rank, size, ctx, regions=[region])
    w.peers[r]      # Peer of rank r (None for this rank)
    w.descs[r]      # rank r's descriptors: a list, one per region, in order
    w.descs[r][i]   # rank r's i-th region: what peer.write() takes

Any object with set(key, bytes) and a blocking get(key) works: TCPStore,
FileStore, HashStore.
"""
import pickle
from typing import Dict, List, Optional, Sequence


class World:
    """What from_store() returns: rank, size, peers (rank -> Peer, None
    for this rank), descs (rank -> list of packed descriptors, one per
    region that rank passed, in order)."""

    def __init__(self, rank: int, size: int, peers: Dict, descs: Dict):
        self.rank = rank
        self.size = size
        self.peers: Dict[int, Optional[object]] = peers
        self.descs: Dict[int, List[bytes]] = descs

    def close(self) -> None:
        """Close every peer (the regions and the ctx stay the caller's)."""
        for p in self.peers.values():
            if p is not None:
                p.close()


def from_store(store, rank: int, size: int, ctx, regions: Sequence = (),
               prefix: str = "tern") -> World:
    """Publish this rank's card and descriptors, read every other rank's,
    and add each as a peer. descs[r][i] is rank r's i-th region."""
    mine = (ctx.card, [r.descriptor() for r in regions])
    store.set("%s/%d" % (prefix, rank), pickle.dumps(mine))
    peers, descs = {}, {}
    for r in range(size):
        if r == rank:
            peers[r], descs[r] = None, mine[1]
            continue
        card, d = pickle.loads(bytes(store.get("%s/%d" % (prefix, r))))
        peers[r] = ctx.peer(card)
        descs[r] = d
    return World(rank, size, peers, descs)
