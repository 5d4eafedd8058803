-- Snapshot scrub: claims name tasks queued in the environment a snapshot was
-- taken from; their messages stayed there, so the claims must go.
TRUNCATE taskclaim.claim;
