"""What RunPod charges and who pays: the charges read back, the namespace caps, whose
each charge is, and charges for ids nobody lists (ghost charges)."""
