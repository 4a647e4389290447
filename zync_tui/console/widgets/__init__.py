"""The console's panels: Topics, Loops, ETL, Pending/Expired, Log, and the status bar."""
