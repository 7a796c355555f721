"""The league family: AlphaStar-style main agents, main exploiters and league exploiters.

- `league`: `League`, the driver;
- `rules`: `LeagueConfig`, `Member` and the `Matchmaker` (a target selector by PFSP);
- `pfsp`: prioritised fictitious self-play weights; `win_rates`: `WinRateTable`;
- `records`: `LeagueRecord`, `MatchRecord` and the main policy's profile.
"""
