
      SET statement_timeout = '30s';
      SELECT taskclaim.delete_expired();
    