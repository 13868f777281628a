"""Orders in which data travels: rings (several channels) and trees."""
