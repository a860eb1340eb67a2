DROP VIEW link_codes;
