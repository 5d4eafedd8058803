"""Rooms, whose slugs the database computes, refreshed by a claimed task."""
